"""The pattern every llminfer widget follows: controls → a pure function → result → picture.

An ``Explorer`` holds its controls in ``.controls`` (name → ipywidget), recomputes ``.result``
with a pure function whenever a control changes, and draws ``.figure`` from the result. A test
can set ``explorer.controls["x"].value`` and assert on ``explorer.result`` without a kernel.
Bad combinations never raise into the notebook: ``.error`` holds the message and the widget
shows it in place of the result. A result that could not run on real hardware (an ``Estimate``
or ``MemoryPlan`` with ``fits`` False, or a table with a False ``fits`` column) keeps its
numbers but ``.warning`` holds the reason and the widget shows it above them.

Two rules keep the explorers right and quick in a real browser:

* **A first draw sends nothing back.** A browser slider with ``continuous_update`` on passes
  its own "update" event, which noUiSlider fires when the slider is created, back to the
  kernel, and for a float the value carries noise (500 → 500.00000000000006): the kernel took
  that as a change and recomputed with the *stale* value, undoing what a later cell had set
  (issue 15; scripts/browser_check.py reproduces it). Two guards, each enough on its own:
  sliders send on release only (``continuous_update=False``, which also debounces drags), and
  no value crosses the wire as a float: integer sliders round in the browser
  (``Math.round``) and a selection slider sends an option's index, so an echo would equal what
  was sent. The base class refuses float-valued controls; :func:`choice_slider` offers a grid
  of floats instead.
* **A new picture is cheap.** Sliders send on release only (no burst of updates during a
  drag); a picture already made for the same values comes from a small cache; the layout that
  constrained layout computed for the first picture is reused for later pictures of the same
  shape (that pass is half the cost of a picture), and the PNG is compressed lightly.
* **The next picture is often ready.** In a Jupyter kernel a worker process draws the
  pictures one step away from the current values while the learner looks
  (``llminfer.widgets._prefetch``); a move to one of them shows it before the result is even
  recomputed.
"""

from __future__ import annotations

import functools
import html
import inspect
import json
import math
import time
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import ipywidgets as W
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from traitlets import TraitError

from llminfer.language import _, get_language
from llminfer.plots._figure import NotebookFigure, drawing_into, figure_png
from llminfer.widgets import _prefetch

#: Controls whose value travels between browser and kernel as a float: refused (see above).
FLOAT_CONTROLS = (W.FloatSlider, W.FloatLogSlider, W.FloatText, W.BoundedFloatText)
#: Pictures kept per explorer, by control values (a learner moves back and forth).
PICTURE_CACHE_SIZE = 32
#: zlib level for the explorer's PNG: 1 is several times faster than matplotlib's 6 and the
#: file is only slightly larger (flat-colour plots compress well at any level).
PNG_COMPRESS_LEVEL = 1
#: Padding around each axes in the layout the later pictures reuse, inches.
LAYOUT_PAD_IN = 0.12


def choice_slider(
    value: float, options: Sequence[float], description: str, fmt: str = "{:g}"
) -> W.SelectionSlider:
    """A slider over a fixed grid of float ``options`` (any unit) whose value never drifts.

    The browser sends only the index of an option, so the value the kernel holds is always
    one of ``options`` exactly. ``value`` joins the grid when it is not on it, so an explorer
    accepts any finite starting value. Labels are ``fmt.format(option)``.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{description}: value={value!r} is not allowed; give a finite number")
    grid = sorted({float(o) for o in options} | {float(value)})
    return W.SelectionSlider(
        options=[(fmt.format(o), o) for o in grid],
        value=float(value),
        description=description,
    )


def grid(low: float, high: float, steps: int) -> list[float]:
    """``steps + 1`` evenly spaced values from ``low`` to ``high``, rounded to 10 decimals so
    that 0.1 on the grid is the literal 0.1 a notebook cell would type.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if steps < 1:
        raise ValueError(f"steps={steps!r} is not allowed; give 1 or more")
    return [round(low + (high - low) * i / steps, 10) for i in range(steps + 1)]


def whole(value: float, name: str) -> int:
    """``value`` as an int for an integer slider; ValueError naming ``name`` if it is not a
    whole number (500.0 → 500; 500.5 is refused rather than silently truncated).

    Introduced in: notebooks/03_metrics.ipynb
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} is not allowed; give a whole number")
    rounded = round(value)
    if abs(value - rounded) > 1e-9 * max(1.0, abs(value)):
        raise ValueError(f"{name}={value!r} is not allowed; give a whole number")
    return int(rounded)


def _layout_key(fig: Figure) -> tuple:
    """What must match for a figure to reuse another's layout: size and axes grid."""
    specs = []
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        specs.append(None if spec is None else spec.get_geometry())
    width, height = fig.get_size_inches()
    return (round(width, 3), round(height, 3), tuple(specs), len(fig.legends))


class Explorer(ABC):
    """Base class: subclasses implement ``compute``, and optionally ``describe`` and ``draw``.

    A subclass's ``title`` is written in English and marked ``N_``; it is shown in the
    learner's language. Pictures are kept per language as well as per control values.

    Introduced in: notebooks/01_introduction.ipynb
    """

    title = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every explorer's constructor builds its controls from its arguments; a value a
        # control refuses (TraitError: "Invalid selection") or silently clamps to its range
        # becomes a ValueError naming the argument and what it may be.
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _named_arguments(cls.__dict__["__init__"])

    def __init__(self, controls: dict[str, W.ValueWidget]) -> None:
        for name, control in controls.items():
            if isinstance(control, FLOAT_CONTROLS):
                raise TypeError(
                    f"control {name!r} is a {type(control).__name__}: a float control's value "
                    "comes back from the browser with float noise and undoes later changes; "
                    "use an IntSlider or llminfer.widgets._explorer.choice_slider"
                )
        self.controls = controls
        self.result: Any = None
        self.error: str | None = None
        self.warning = ""
        #: Seconds the last update spent computing and making its picture (kernel side).
        self.last_update_s: float = 0.0
        self._pictures: OrderedDict[tuple, bytes] = OrderedDict()
        self._layouts: dict[tuple, list] = {}
        # Made ahead by the worker (llminfer.widgets._prefetch), by control values; set up by
        # _named_arguments once the explorer exists, with the arguments it was made from.
        self._ahead: dict[tuple, Any] = {}
        self._arguments: dict[str, Any] | None = None
        self._token = uuid.uuid4().hex
        self._quiet = False
        # One figure, drawn into again for every picture, on an Agg canvas of its own so the
        # renderer (and matplotlib's text measurements cached per renderer) is reused.
        self._canvas_figure = NotebookFigure()
        FigureCanvasAgg(self._canvas_figure)
        self._figure: Figure | None = None
        self._figure_key: tuple | None = None  # the values self._figure was drawn for
        self._summary = W.HTML()
        self._summary.add_class("llminfer-summary")
        # The values the shown result was computed from, as JSON: a browser test compares them
        # with what each control shows. Hidden; it is data, not prose.
        self._computed = W.HTML(layout=W.Layout(display="none"))
        self._computed.add_class("llminfer-computed")
        self._image = W.Image(format="png", layout=W.Layout(max_width="900px"))
        self._image.add_class("llminfer-picture")
        for name, control in controls.items():
            control.style.description_width = "initial"
            control.layout.width = "100%"
            control.add_class("llminfer-control")
            control.add_class(f"llminfer-control-{name}")
            if hasattr(control, "continuous_update"):
                control.continuous_update = False  # a drag sends one value, on release
            control.observe(self._on_change, names="value")
        self.ui = W.VBox(
            [
                W.HTML(f"<b>{html.escape(_(self.title))}</b>"),
                W.GridBox(
                    list(controls.values()),
                    # Columns at least 420 px wide: a long description and the readout leave
                    # the track room to move (two columns on a wide screen, one on a narrow).
                    layout=W.Layout(
                        grid_template_columns="repeat(auto-fit, minmax(420px, 1fr))",
                        grid_gap="2px 16px",
                    ),
                ),
                self._summary,
                self._computed,
                self._image,
            ]
        )
        self.ui.add_class("llminfer-explorer")
        self.ui.add_class(f"llminfer-{type(self).__name__}")
        self.update()

    def values(self) -> dict[str, Any]:
        """Current value of every control, by name."""
        return {name: control.value for name, control in self.controls.items()}

    @abstractmethod
    def compute(self, **values: Any) -> Any:
        """The result for the controls' current values (a pure function of them)."""

    def describe(self, result: Any) -> str:
        """An HTML summary of the result."""
        return html.escape(str(result))

    def draw(self, result: Any) -> Figure | None:
        """The picture of ``result`` (a matplotlib Figure), or None for no picture."""
        return None

    def feasibility_warning(self, result: Any) -> str:
        """Why ``result`` describes a configuration that could not run, or "" when it could.

        Looks for ``fits``/``reason`` on the result, on its ``estimate``, or in a table's
        ``fits``/``reason`` columns. Subclasses override it for other kinds of result.
        """
        for obj in (result, getattr(result, "estimate", None)):
            fits = getattr(obj, "fits", None)
            if isinstance(fits, bool) and not fits:
                return getattr(obj, "reason", "") or _("this configuration does not fit")
        columns = getattr(result, "columns", ())
        if "fits" in columns and not result["fits"].all():
            bad = result[~result["fits"].astype(bool)]
            first = str(bad["reason"].iloc[0]) if "reason" in columns else ""
            # TRANSLATORS: {bad} of {total} rows of a table; {reason} says why the first does not.
            if first:
                found = _("{bad} of {total} rows do not fit: {reason}")
            else:
                found = _("{bad} of {total} rows do not fit")
            return found.format(bad=len(bad), total=len(result), reason=first)
        return ""

    def _shown_as(self, values: dict) -> dict:
        """``values`` as the controls show them: a dropdown whose options are (label, value)
        pairs shows the label, so the browser test compares the label."""
        shown = {}
        for name, value in values.items():
            control = self.controls.get(name)
            label = getattr(control, "label", None)
            labelled = isinstance(control, W.Dropdown) and isinstance(label, str)
            shown[name] = label if labelled and label != str(value) else value
        return shown

    def update(self) -> None:
        """Recompute the result from the controls and refresh summary and picture."""
        start = time.perf_counter()
        values = self.values()
        ready = self._ready_picture(self._key(values))
        if ready is not None:
            self._image.value = ready  # made ahead: shown before the result is recomputed
        self._computed.value = html.escape(json.dumps(self._shown_as(values), default=str))
        try:
            self.result = self.compute(**values)
            self.error = None
        except ValueError as exc:
            self.result, self.error, self.warning = None, str(exc), ""
            self._figure, self._figure_key = None, None
            self._image.value = b""
            self._summary.value = f"<p style='color:#b00020'>⚠ {html.escape(self.error)}</p>"
            self.last_update_s = time.perf_counter() - start
            return
        if ready is None:
            self._image.value = self._picture(values)  # first: it is what the eye waits for
        self.warning = self.feasibility_warning(self.result)
        not_feasible = html.escape(_("⚠ Not feasible:"))  # outside the f-string: extracted
        banner = (
            f"<p style='color:#b00020'><b>{not_feasible}</b> {html.escape(self.warning)}</p>"
            if self.warning
            else ""
        )
        self._summary.value = banner + self.describe(self.result)
        self.last_update_s = time.perf_counter() - start
        self._make_ahead()

    @property
    def figure(self) -> Figure | None:
        """The matplotlib Figure of the current result (None after an error or without a
        picture). The explorer draws into one figure again and again: copy what you keep."""
        if self.error is not None:
            return None
        key = self._key(self.values())
        if self._figure_key != key or key is None:
            self._draw()
            self._figure_key = key
        return self._figure

    @staticmethod
    def _key(values: dict[str, Any]) -> tuple | None:
        # the language too: the same values make another picture in Chinese
        key = (("language", get_language()), *values.items())
        try:
            hash(key)
        except TypeError:  # an unhashable value: never cached
            return None
        return key

    def _draw(self) -> Figure | None:
        with drawing_into(self._canvas_figure):
            self._figure = self.draw(self.result)
        return self._figure

    def _picture(self, values: dict[str, Any]) -> bytes:
        """PNG bytes for ``values``: from the cache, or drawn now."""
        key = self._key(values)
        if key is not None and key in self._pictures:
            self._pictures.move_to_end(key)
            return self._pictures[key]
        figure = self._draw()
        self._figure_key = key
        png = b"" if figure is None else self._png(figure)
        self._remember(key, png)
        return png

    def _png(self, figure: Figure) -> bytes:
        """PNG bytes of ``figure``, reusing the layout of an earlier figure of the same shape."""
        key = _layout_key(figure)
        positions = self._layouts.get(key)
        if positions is not None and figure.get_layout_engine() is not None:
            # No layout engine at all (None, not "none": matplotlib's "none" leaves a
            # placeholder engine, and savefig draws the whole figure once more, without
            # rendering, for any engine: twice the work of a picture).
            figure.set_layout_engine(None)
            for ax, position in zip(figure.axes, positions, strict=True):
                ax.set_position(position, which="both")
        elif positions is None and isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine):
            # The first picture of a shape sets the layout for the later ones, whose tick
            # labels may be wider: leave them room (inches; matplotlib's default pad is 3/72).
            figure.get_layout_engine().set(w_pad=LAYOUT_PAD_IN, h_pad=LAYOUT_PAD_IN, wspace=0.06)
        png = figure_png(figure, compress_level=PNG_COMPRESS_LEVEL)
        if positions is None:
            self._layouts[key] = [ax.get_position(original=True) for ax in figure.axes]
        return png

    def _on_change(self, _change: dict) -> None:
        if not self._quiet:
            self.update()

    def _set_quietly(self, values: dict[str, Any]) -> None:
        """Set controls without an update per control (the caller updates once)."""
        self._quiet = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._quiet = False

    def _remember(self, key: tuple | None, png: bytes) -> None:
        if key is None:
            return
        self._pictures[key] = png
        self._pictures.move_to_end(key)
        while len(self._pictures) > PICTURE_CACHE_SIZE:
            self._pictures.popitem(last=False)

    def _ready_picture(self, key: tuple | None) -> bytes | None:
        """The picture for ``key`` if it is made or being made ahead (then waited for: it is
        further along than a new drawing would be); None to draw it here."""
        if key is None:
            return None
        if key in self._pictures:
            self._pictures.move_to_end(key)
            return self._pictures[key]
        job = self._ahead.pop(key, None)  # asked of the worker: drawing now, or drawn
        if job is None or (not job.running() and job.cancel()):
            return None  # not asked yet (still waiting its turn): drawn here
        try:
            png = job.result(timeout=_prefetch.WAIT_S)
        except Exception:  # the worker failed or is slow: draw here
            return None
        if not png:
            return None
        self._remember(key, png)
        return png

    def _make_ahead(self, first: bool = True) -> None:
        """Ask the worker for the pictures one step away from the current values (``first``:
        ahead of other explorers' wishes, as after a move)."""
        if self._arguments is None or self.error is not None or not _prefetch.enabled():
            return
        for key, job in list(self._ahead.items()):  # collect what is done
            if job.done():
                del self._ahead[key]
                if not job.cancelled() and job.exception() is None and job.result():
                    self._remember(key, job.result())
        wanted = {}
        for values in _prefetch.neighbours(self.controls):
            key = self._key(values)
            if key is not None and key not in self._pictures and key not in self._ahead:
                wanted[key] = values
        _prefetch.ask(self, wanted, first=first)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        # The widget view, with a plain-text stand-in that says what this is (where no widget
        # can be drawn) instead of ipywidgets' VBox(children=(HTML(value=... .
        bundle = self.ui._repr_mimebundle_(**kwargs)
        # TRANSLATORS: {name} is the explorer's class (RooflineExplorer), {title} its title.
        stand_in = _("{name}: {title} (run the notebook to move its controls)")
        bundle["text/plain"] = stand_in.format(name=type(self).__name__, title=_(self.title))
        return bundle


def _allowed(control: W.ValueWidget) -> str:
    """What a control accepts, in words."""
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in options]
        return "one of " + ", ".join(repr(v) for v in values)
    if hasattr(control, "min") and hasattr(control, "max"):
        kind = "an integer" if isinstance(control.value, int) else "a number"
        return f"{kind} from {control.min!r} to {control.max!r}"
    return f"of type {type(control.value).__name__}"


def _named_arguments(init):
    """Wrap an explorer's ``__init__`` so a bad argument raises ValueError naming it."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)  # TypeError for unknown names, as usual
        given = {k: v for k, v in bound.arguments.items() if k != "self"}
        name = type(self).__name__
        try:
            init(self, *args, **kwargs)
        except TraitError as exc:
            # Find the argument: the one whose control refuses it in a default-built explorer.
            defaults = type(self)()
            for key, value in given.items():
                control = defaults.controls.get(key)
                if control is None:
                    continue
                try:
                    control.value = value
                except TraitError:
                    raise ValueError(
                        f"{name}({key}={value!r}): {key} must be {_allowed(control)}"
                    ) from None
            raise ValueError(f"{name}: an argument was refused: {exc}") from None
        for key, value in given.items():
            control = self.controls.get(key)
            if control is None:
                continue
            unset = value is None and bool(getattr(control, "options", None))
            if unset or _differs(control.value, value):
                raise ValueError(f"{name}({key}={value!r}): {key} must be {_allowed(control)}")
        if type(self).__init__ is wrapper:  # the explorer's own class, not a base class's init
            self._arguments = given
            self._make_ahead(first=False)

    return wrapper


def _differs(shown: Any, given: Any) -> bool:
    """True when a control holds another value than it was given (clamped to its range)."""
    try:
        return bool(shown != given)
    except (TypeError, ValueError):
        return False
