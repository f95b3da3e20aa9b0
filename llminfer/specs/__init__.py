"""What the hardware, the model and the engine are — the facts every other part starts from.

``Model`` (``models``: an architecture's shape, from its ``config.json``), ``GPU`` (``hardware``:
memory, bandwidth, dense peak FLOP/s and links, from the vendor's data sheet; ``measure_machine``
describes this computer), ``StepModel`` (``stepmodel``: what an engine's kernels reach on a
chip), the shipped presets with a source per row (``presets``) and the argument checks every
part uses (``checks``). Frozen dataclasses, no arithmetic of chapter 2 or 4 here. Used by every
notebook (01–08); imports nothing from the other parts.
"""
