"""Answers to notebook 08's "Try it" questions, computed with the toy server, the client and
``simulate`` (for the paced server, whose steps ``simulate`` predicts)."""

from llminfer.exercises import Exercise
from llminfer.language import N_

#: The paced server of notebook 08: Llama-3.1-8B on an H100 SXM, timed as vLLM runs it.
PACED = "llama-3.1-8b:h100-sxm:vllm"


def _tokens_counted() -> int:
    """Tokens the client counts in a chat stream: role-only first chunk, 64 text chunks, two
    empty ones, a keep-alive comment, a usage-only chunk and [DONE]."""
    from llminfer.bench.sse import SSEDecoder, read_chunk
    from llminfer.bench.stub import sse

    events = [sse({"choices": [{"delta": {"role": "assistant"}}]})]
    events += [sse({"choices": [{"delta": {"content": " t1"}}]}) for _ in range(64)]
    events += [sse({"choices": [{"delta": {"content": ""}}]})] * 2
    events += [b": ping\n\n", sse({"choices": [], "usage": {"completion_tokens": 64}})]
    events += [sse("[DONE]")]
    decoder, count = SSEDecoder(), 0
    for line in b"".join(events).splitlines(keepends=True):
        data = decoder.feed(line)
        if data is not None and read_chunk(data).text is not None:
            count += 1
    return count


def _capacity_tokens() -> int:
    from llminfer.serve import ServeConfig

    return ServeConfig().capacity_tokens


def _steps_to_first_token() -> int:
    from llminfer.serve import ServeConfig, ToyEngine, build_model

    engine = ToyEngine(build_model("tiny"), ServeConfig(max_num_batched_tokens=64))
    events: list = []
    engine.submit(list(range(300)), 4, events.append)
    steps = 0
    while not events:
        engine.step()
        steps += 1
    return steps


def _p99_itl_without_chunked_prefill_ms() -> float:
    """simulate's p99 ITL (ms) for 8 users with 2,000-token prompts and 32-token answers on the
    paced server without chunked prefill (2,048 tokens a step, 8 sequences)."""
    from llminfer.serve import ServeConfig
    from llminfer.sim.loadsweep import itl_stats
    from llminfer.sim.simulate import simulate
    from llminfer.sim.workload import Workload

    config = ServeConfig(
        paced=PACED, max_num_seqs=8, max_num_batched_tokens=2048, chunked_prefill=False
    )
    workload = Workload(24, concurrency=8, prompt_tokens=2000, output_tokens=32, seed=0)
    return 1e3 * float(itl_stats(simulate(workload, **config.simulate_kwargs()).log)["itl_s_p99"])


def _knee_at_16_sequences() -> float:
    """The knee (users) of notebook 08's sweep on the paced server with max_num_seqs=16."""
    from llminfer.bench.results import simulate_sweep
    from llminfer.serve import ServeConfig
    from llminfer.sim.loadsweep import knee
    from llminfer.sim.workload import Workload

    config = ServeConfig(paced=PACED, max_num_seqs=16, max_num_batched_tokens=8192)
    workload = Workload(8, concurrency=1, prompt_tokens=(128, 384), output_tokens=(16, 48))
    table, _ = simulate_sweep(
        workload,
        concurrencies=[1, 2, 4, 8, 16, 32, 64],
        requests_per_user=2,
        **config.simulate_kwargs(),
    )
    return knee(table[["concurrency"]].assign(output_tps=table["arrival_tps"]))


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "08.1",
        N_(
            "A chat stream sends a role-only first chunk, 64 chunks of one word, two chunks with "
            "empty content, a keep-alive comment, a usage-only chunk and [DONE]. How many tokens "
            "does a client count if it counts chunks that carry text?"
        ),
        _tokens_counted,
        unit="tokens",
        rel_tol=0.0,
        hint=N_("Only chunks with non-empty text are tokens; comments, role and usage are not."),
    ),
    Exercise(
        "08.2",
        N_("How many tokens does the default toy server's KV cache hold (ServeConfig())?"),
        _capacity_tokens,
        unit="tokens",
        rel_tol=0.0,
        hint=N_("num_kv_blocks × block_size."),
    ),
    Exercise(
        "08.3",
        N_(
            "With chunked prefill and max_num_batched_tokens=64, how many engine steps does a "
            "300-token prompt take until its first token, on an otherwise idle server?"
        ),
        _steps_to_first_token,
        unit="steps",
        rel_tol=0.0,
        hint=N_(
            "Each step computes at most 64 prompt tokens; the first token comes from the "
            "step that computes the prompt's last one."
        ),
    ),
    Exercise(
        "08.4",
        N_(
            "Restart the paced server with --no-chunked-prefill --max-num-batched-tokens 2048 and "
            "measure 8 users with 2,000-token prompts and 32-token answers (24 requests): what p99 "
            "inter-token latency (ms) does simulate predict, and do you measure it?"
        ),
        _p99_itl_without_chunked_prefill_ms,
        unit="ms",
        rel_tol=0.15,
        hint=N_(
            "Without chunked prefill a step is prompts or decodes: every decoding stream waits "
            "while the prompts that fit 2,048 tokens a step are computed, one per step; the "
            "longest gap is several such steps."
        ),
    ),
    Exercise(
        "08.5",
        N_(
            "Restart the paced server with --max-num-seqs 16 and repeat section 2's sweep: at "
            "which load (users) is the knee of the arrival-window throughput now?"
        ),
        _knee_at_16_sequences,
        unit="users",
        rel_tol=0.0,
        hint=N_("Past max_num_seqs the batch cannot grow: more users only wait."),
    ),
)
