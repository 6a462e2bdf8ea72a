"""The KV lab's scenarios: request streams that each make one property of a paged cache visible.

    ragged         many requests of ragged prompt and output lengths arriving over a few steps:
                   paged waste stays below one block per sequence, contiguous regions sized
                   for the longest request sit mostly empty
    shared-prompt  every request starts with the same long system prompt: its full blocks are
                   computed once and hit in the prefix cache by every later request
    fork           parallel sampling: a request forks into several samples that share every
                   prompt block; each sample's first new token copies the shared partial
                   block (copy-on-write)
    pressure       more work than the pool holds: requests wait for blocks, running ones may be
                   preempted (recomputed later), and a request longer than the whole pool is
                   refused with a message instead of waiting forever
    multi-turn     two chats of three turns: each turn's prompt is the conversation so far
                   (earlier questions and answers) plus a new question, so it starts with the
                   previous turn's whole prompt, which rarely ends on a block boundary: the
                   radix tree (--prefix-cache radix) finds all of it, block hashes the whole
                   blocks only

A scenario is text, not token ids: `prepare(tokenizer, ...)` tokenizes it for the model at hand
(with the chat template when the model has one) and sizes the pool from the token counts,
unless the caller fixes the number of blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.quant.calibration import asset_text

DEFAULT_SCENARIO = "shared-prompt"


@dataclass(frozen=True)
class RequestSpec:
    request_id: str
    user: str
    max_new_tokens: int
    arrival_step: int = 0
    system: str = ""
    n_samples: int = 1
    """> 1: parallel sampling, the request forks into this many sequences after its prefill."""
    temperature: float = 0.0
    """0 is greedy."""
    seed: int = 0
    longer_than_pool: bool = False
    """The prompt is padded at prepare time until it is longer than the whole pool."""
    history: tuple[tuple[str, str], ...] = ()
    """Earlier (user, assistant) turns of the conversation, before `user`."""


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    description: str
    requests: tuple[RequestSpec, ...]
    pool_fraction: float = 1.0
    """Default pool size: this fraction of the blocks all (feasible) requests would need."""


@dataclass(frozen=True)
class PreparedRequest:
    spec: RequestSpec
    prompt_ids: tuple[int, ...]


@dataclass(frozen=True)
class PreparedScenario:
    scenario: Scenario
    requests: tuple[PreparedRequest, ...]
    block_size: int
    n_blocks: int
    max_seq_len: int
    """Slots each contiguous region reserves: the longest feasible request, rounded up to a
    whole block (a generous baseline: real servers reserve the model's whole context)."""


LIBRARY_SYSTEM = (
    "You are the help desk assistant of the Riverside Public Library. The library is open "
    "Monday to Friday from 9 am to 8 pm and on Saturday from 10 am to 4 pm; it is closed on "
    "Sunday. Members may borrow up to ten books for three weeks, renew them twice online, and "
    "reserve new titles for free. Printing costs ten cents a page. Answer briefly and politely."
)

PROOFREAD = (
    "Please proofread this report. The quarterly figures show that the northern warehouse "
    "shipped more parcels than the southern one, although the southern warehouse has more "
    "staff and a larger loading bay. "
)

_RAGGED = (
    ("What is 2 + 2?", 8, 0),
    ("Name three primary colours.", 16, 0),
    ("Explain in two sentences why the sky is blue.", 40, 0),
    ("Write a haiku about autumn leaves.", 24, 1),
    ("Summarise the plot of Romeo and Juliet in a short paragraph.", 48, 1),
    ("Translate 'good morning' into French.", 8, 2),
    ("List four planets of the solar system.", 20, 3),
    ("Describe how a bicycle works to a ten-year-old, covering the pedals, the chain and the "
     "gears.", 48, 4),
    ("What is the capital of Japan?", 8, 5),
    ("Give me one tip for learning to cook.", 32, 6),
)

_LIBRARY_QUESTIONS = (
    "When does the library open on Saturday?",
    "How many books can I borrow?",
    "Can I renew a book online?",
    "How much does printing cost?",
    "Is the library open on Sunday?",
    "How long can I keep a book?",
    "Can I reserve a new title?",
    "What are your hours on Monday?",
)

_STORIES = (
    "a lighthouse keeper", "a lost kitten", "a robot gardener", "a dragon who cannot fly",
    "a time-travelling chef", "a shy astronaut", "a talking tree", "a pirate librarian",
    "a snowman in summer", "a detective owl",
)


_CHATS = (
    (("Can I renew a book online?",
      "Yes: sign in to your account and press Renew next to the loan."),
     ("How many times can I renew it?", "Up to three times, unless someone has reserved it."),
     ("And if someone has reserved it?", "Then it is due back on its date; we will email you.")),
    (("Is the library open on Sunday?", "Yes, from noon to five in the afternoon."),
     ("Can I print there on Sunday?", "Yes, the printers work whenever the library is open."),
     ("How much does a page cost?", "Ten cents for black and white, fifty for colour.")),
)


LONG_DOCUMENTS = (asset_text("clocks.txt")[:9000], asset_text("backups.txt")[:9000])
"""About 2,000 tokens each (9,000 characters of the shipped texts)."""


def _scenarios() -> dict[str, Scenario]:
    ragged = Scenario(
        "ragged", "Many ragged requests",
        "Ten requests with prompts and outputs of very different lengths arrive over seven "
        "steps. Paged: each sequence wastes at most the unfilled tail of its last block. "
        "Contiguous: each request reserves the longest request's length up front.",
        tuple(RequestSpec(f"r{i}", text, n, step) for i, (text, n, step) in enumerate(_RAGGED)))
    shared = Scenario(
        "shared-prompt", "Shared system prompt (prefix caching)",
        "Eight questions to the same assistant, one per step, all starting with the same long "
        "system prompt. Its full blocks are computed once; every later request finds them in "
        "the prefix cache (shared blocks, hit rate) and only computes its own question.",
        tuple(RequestSpec(f"r{i}", q, 24, i, system=LIBRARY_SYSTEM)
              for i, q in enumerate(_LIBRARY_QUESTIONS)))
    fork = Scenario(
        "fork", "Parallel sampling (fork, copy-on-write)",
        "Two requests each sample several answers (temperature 0.7). After its prompt is "
        "computed a request forks: the samples share every prompt block (ref count = samples); "
        "the first token each sample adds copies the shared, partly filled last block.",
        (RequestSpec("r0", "Suggest a name for a friendly robot.", 16, 0, n_samples=4,
                     temperature=0.7, seed=1),
         RequestSpec("r1", "Write the first line of a poem about the sea.", 24, 2, n_samples=3,
                     temperature=0.7, seed=2)))
    stories = tuple(RequestSpec(f"r{i}", f"Tell me a short story about {who}.", 48, i // 3)
                    for i, who in enumerate(_STORIES))
    pressure = Scenario(
        "pressure", "Memory pressure (pool full)",
        "More requests than the pool holds: they wait for free blocks (first come, first "
        "served), and when running sequences need a block and none is free the youngest is "
        "preempted and recomputed later. One request is longer than the whole pool: it is "
        "refused at once, with a message, instead of waiting forever.",
        (*stories[:3],
         RequestSpec("r-long", PROOFREAD, 16, 1, longer_than_pool=True),
         *stories[3:]),
        pool_fraction=0.45)
    chats = []
    for c, turns in enumerate(_CHATS):
        for t, (question, _answer) in enumerate(turns):
            chats.append(RequestSpec(f"c{c}t{t}", question, 12, 16 * t + c,
                                     system=LIBRARY_SYSTEM, history=turns[:t]))
    multi = Scenario(
        "multi-turn", "Multi-turn chat (radix prefix cache)",
        "Two conversations of three turns with the library assistant. Each turn's prompt is "
        "the conversation so far plus a new question, so it begins with the previous turn's "
        "whole prompt. With the radix tree (prefix cache: radix) every one of those tokens "
        "is a hit; block hashes find only the whole blocks of it.",
        tuple(sorted(chats, key=lambda s: s.arrival_step)))
    long = Scenario(
        "long-context", "Long documents (sliding-window layers)",
        "Two requests each read a long document (about 2,000 tokens of the shipped texts) and "
        "answer a question about it. On a model with sliding-window layers (Gemma 3: 15 of "
        "its 18 layers see only the last 512 tokens) those layers keep one block table of "
        "their own and free the blocks that fall behind the window: the bytes held stay near "
        "(n_global · C + n_local · W) / (L · C) of a cache that keeps every token.",
        (RequestSpec("doc0", LONG_DOCUMENTS[0] + "\n\nWhat is this document about?", 32, 0),
         RequestSpec("doc1", LONG_DOCUMENTS[1] + "\n\nSummarise it in one sentence.", 32, 1)))
    return {s.name: s for s in (ragged, shared, fork, pressure, multi, long)}


SCENARIOS: dict[str, Scenario] = _scenarios()
SCENARIO_NAMES = tuple(SCENARIOS)


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; expected one of "
                         f"{', '.join(SCENARIO_NAMES)}") from None


def encode_request(tokenizer, user: str, system: str = "",
                   history: tuple[tuple[str, str], ...] = ()) -> list[int]:
    """Prompt ids: through the model's chat template when it has one, else plain text
    ("User: ..." / "Assistant: ..." lines when there are earlier turns)."""
    if getattr(tokenizer, "chat_template", None) is not None:
        messages = ([{"role": "system", "content": system}] if system else [])
        for asked, answered in history:
            messages += [{"role": "user", "content": asked},
                         {"role": "assistant", "content": answered}]
        messages.append({"role": "user", "content": user})
        return tokenizer.encode_chat(messages)  # a template's own BOS written once
    if history:
        turns = "".join(f"User: {q}\nAssistant: {a}\n" for q, a in history)
        user = f"{turns}User: {user}\nAssistant:"
    return tokenizer.encode(f"{system}\n\n{user}" if system else user)


def _blocks(n_tokens: int, block_size: int) -> int:
    return -(-n_tokens // block_size)


def pool_size(requests, block_size: int, n_blocks: int | None, pool_fraction: float = 1.0
              ) -> tuple[int, int]:
    """(blocks in the pool, slots each contiguous region reserves) for (RequestSpec, prompt
    ids) pairs: `n_blocks` when given, else `pool_fraction` of the blocks every request's
    samples would need together (at least the biggest request's and 2 more); the regions hold
    the longest request, rounded up to a whole block."""
    if not n_blocks:
        need = sum(s.n_samples * _blocks(len(ids) + s.max_new_tokens, block_size)
                   for s, ids in requests)
        biggest = max(_blocks(len(ids) + s.max_new_tokens, block_size) for s, ids in requests)
        n_blocks = max(int(round(need * pool_fraction)), biggest + 2)
    longest = max(len(ids) + s.max_new_tokens for s, ids in requests)
    return n_blocks, _blocks(longest, block_size) * block_size


def prepare(scenario: Scenario | str, tokenizer, block_size: int = 16,
            n_blocks: int | None = None) -> PreparedScenario:
    """Tokenize the requests and size the pool (`n_blocks` None or 0: from the scenario).

    A request marked `longer_than_pool` gets its prompt repeated until it is longer than the
    pool's slots, so it is refused whatever the pool size.
    """
    if isinstance(scenario, str):
        scenario = get_scenario(scenario)
    if block_size < 1:
        raise ValueError(f"block size must be at least 1 token, got {block_size}")
    if n_blocks is not None and n_blocks < 0:
        raise ValueError(f"the pool needs a positive number of blocks, got {n_blocks}")
    encoded = [(spec, encode_request(tokenizer, spec.user, spec.system, spec.history))
               for spec in scenario.requests]
    normal = [(s, ids) for s, ids in encoded if not s.longer_than_pool]
    n_blocks, max_seq_len = pool_size(normal, block_size, n_blocks, scenario.pool_fraction)
    n_slots = n_blocks * block_size
    requests = []
    for spec, ids in encoded:
        if spec.longer_than_pool:
            filler = spec.user[len("Please proofread this report. "):]
            per_repeat = max(len(encode_request(tokenizer, filler)) - 1, 1)
            text = spec.user
            while len(ids) <= n_slots:
                text += filler * (1 + (n_slots + 1 - len(ids)) // per_repeat)
                ids = encode_request(tokenizer, text, spec.system)
            spec = RequestSpec(**{**spec.__dict__, "user": text})
        requests.append(PreparedRequest(spec, tuple(ids)))
    return PreparedScenario(scenario, tuple(requests), block_size, n_blocks, max_seq_len)
