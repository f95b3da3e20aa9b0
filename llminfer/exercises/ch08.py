"""Answers to notebook 08's "Try it" questions, computed with the toy server and the client."""

from llminfer.exercises import Exercise


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


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "08.1",
        "A chat stream sends a role-only first chunk, 64 chunks of one word, two chunks with "
        "empty content, a keep-alive comment, a usage-only chunk and [DONE]. How many tokens "
        "does a client count if it counts chunks that carry text?",
        _tokens_counted,
        unit="tokens",
        rel_tol=0.0,
        hint="Only chunks with non-empty text are tokens; comments, role and usage are not.",
    ),
    Exercise(
        "08.2",
        "How many tokens does the default toy server's KV cache hold (ServeConfig())?",
        _capacity_tokens,
        unit="tokens",
        rel_tol=0.0,
        hint="num_kv_blocks × block_size.",
    ),
    Exercise(
        "08.3",
        "With chunked prefill and max_num_batched_tokens=64, how many engine steps does a "
        "300-token prompt take until its first token, on an otherwise idle server?",
        _steps_to_first_token,
        unit="steps",
        rel_tol=0.0,
        hint="Each step computes at most 64 prompt tokens; the first token comes from the "
        "step that computes the prompt's last one.",
    ),
)
