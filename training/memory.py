"""Will a run's batches fit in this computer's memory? An estimate made before the first step.

Why: on a CPU, training keeps every layer's attention weights for the backward pass. PyTorch's fused
CPU attention takes no dropout, so under dropout the (rows, heads, T, T) weights are materialised,
and a batch of long rows costs memory in proportion to tokens x T. The shipped classifier's recipe
(batches of up to 16,384 tokens in rows of up to 1,024) peaks at about 12 GB on a CPU; a computer
without that much free memory kills the process with no message from Python. So `training.run`
prints a warning at start-up, on a CPU, when this estimate exceeds the memory available, with the
`--max-tokens` or `--batch-size` that would fit. Checkpoints every few minutes mean a kill loses
minutes, not the run; the warning saves even those.

The estimate, per layer that reads a sequence of length T (a batch of `rows` rows, rows x T tokens):

    bytes = rows x T x (BYTES_PER_CHANNEL x d_model + BYTES_PER_WEIGHT x n_head x T_keys)

BYTES_PER_WEIGHT is what autograd keeps of each attention weight under dropout (the softmax's
output, the dropout's output and the batched product's input: three float32 copies, counted;
without dropout the fused kernel keeps none, and the term is left out). BYTES_PER_CHANNEL is
everything else a layer costs per token and model channel at the peak of a step (saved
activations, their gradients, the allocator's slack), fitted on the peak resident memory of real
steps, under dropout and without it. All come from `python -m benchmarks.train_memory`
(benchmarks/results/train_memory.json, which also compares the estimate with each measured peak).
Under bf16 autocast some activations take half the bytes: the float32 estimate is an upper bound
there. On a GPU the fused attention never materialises the weights, so the estimate does not
apply and no check is made.
"""

from pathlib import Path

BYTES_PER_WEIGHT = 12.0  # kept for backward per head, query and key under dropout (benchmarks/train_memory.py)
BYTES_PER_CHANNEL = 139.0  # the rest, per token, layer and model channel, under dropout (fitted: the same)
BYTES_PER_CHANNEL_NO_DROPOUT = 89.0  # the same without dropout, which keeps a mask per activation it drops
OPTIMIZER_BYTES_PER_PARAMETER = 12  # float32 gradient + AdamW's two moments, allocated at the first step
HEADROOM = 0.9  # plan for at most this share of the available memory
GB = 1e9


def stack_bytes(n_layer: int, n_head: int, d_model: int, rows: int, length: int, keys: int,
                per_channel: float, per_weight: float) -> int:
    """The activation memory of `n_layer` layers reading `rows` rows of `length` tokens, each query
    attending over `keys` keys (its own `length` for self-attention; self + cross for a decoder)."""
    return round(n_layer * rows * length * (per_channel * d_model + per_weight * n_head * keys))


def training_bytes(config, rows: int, parameters: int, per_channel: float | None = None,
                   per_weight: float = BYTES_PER_WEIGHT) -> int:
    """The memory a training step of `rows` rows at the model's longest length adds to the process:
    activations of every stack, plus gradients and optimizer moments. `config` is a DecoderOnlyConfig
    (rows of `block_size`) or an EncoderDecoderConfig (sources of `max_src_len`, targets of
    `max_tgt_len` whose decoder attends to itself and to the source). Without dropout on the
    attention weights the fused kernel keeps none of them, so only the per-channel term counts (and
    that is smaller again without any dropout).
    `per_channel` (default: the constant for the config's dropout) and `per_weight` are there for
    the benchmark that fits them."""
    c = config
    if per_channel is None:
        per_channel = BYTES_PER_CHANNEL if c.dropout > 0 else BYTES_PER_CHANNEL_NO_DROPOUT
    weight = per_weight if c.attention_weight_dropout > 0 else 0.0
    extra = OPTIMIZER_BYTES_PER_PARAMETER * parameters
    if hasattr(c, "block_size"):
        return extra + stack_bytes(c.n_layer, c.n_head, c.d_model, rows, c.block_size, c.block_size,
                                   per_channel, weight)
    source = stack_bytes(c.n_encoder_layer, c.n_head, c.d_model, rows, c.max_src_len, c.max_src_len,
                         per_channel, weight)
    target = stack_bytes(c.n_decoder_layer, c.n_head, c.d_model, rows, c.max_tgt_len,
                         c.max_tgt_len + c.max_src_len, per_channel, weight)
    return extra + source + target


def longest_length(config) -> int:
    """The length of the longest row a batch can hold: the LM's context, or the classifier's source."""
    return config.block_size if hasattr(config, "block_size") else config.max_src_len


def by_budget(config, max_tokens: int | None) -> bool:
    """Whether batches are cut by a token budget: an encoder-decoder task with --max-tokens (the LM's
    batches are always batch_size windows of block_size)."""
    return bool(max_tokens) and not hasattr(config, "block_size")


def worst_rows(config, batch_size: int, max_tokens: int | None) -> int:
    """The rows of the most memory-hungry batch: a token budget filled with the longest rows
    (`training.bucketing` keeps rows x longest <= max_tokens, at least one row), else batch_size."""
    return max(1, max_tokens // config.max_src_len) if by_budget(config, max_tokens) else batch_size


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The kernel's estimate of the memory a process can still take without swapping (Linux's
    MemAvailable); None where the system does not say (macOS, Windows): then no check is made."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_warning(config, batch_size: int, max_tokens: int | None, parameters: int,
                   available: int | None) -> str | None:
    """One line when the worst batch's estimate exceeds HEADROOM of the available memory, naming the
    setting that would fit; None when it fits or the available memory is unknown."""
    if available is None:
        return None
    rows = worst_rows(config, batch_size, max_tokens)
    need = training_bytes(config, rows, parameters)
    budget = HEADROOM * available
    if need <= budget:
        return None
    length = longest_length(config)
    fits = max((r for r in range(rows, 0, -1) if training_bytes(config, r, parameters) <= budget), default=0)
    knob = (f"--max-tokens {fits * length}" if by_budget(config, max_tokens) else f"--batch-size {fits}") if fits else (
        "a shorter context (--set max_src_len=... or block_size=...) or a computer with more memory")
    batch = f"batches of up to {rows * length:,} tokens (rows of {length:,})"
    return (f"memory: {batch} need about {need / GB:.1f} GB more on this CPU, {available / GB:.1f} GB is available; "
            f"the system may stop the run without a message. Would fit: {knob} (estimate: training/memory.py)")
