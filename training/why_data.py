"""The text `training.why` trains its small models on: IMDB reviews, the same batches for every arm.

Every arm of one seed reads the same windows in the same order (`WhyData.batch(seed, step)`), so the
two arms differ in their one switch and nothing else. With `copying`, half of each batch is a run of
random tokens shown again and again (`COPYING`): text that rewards copying what followed an earlier
occurrence of the current token, which the reviews alone reward too rarely for an induction head to
form in a few hundred steps (measured: fine-tuning the shipped LM on reviews with repeated passages
lifted its best induction score only from 0.14 to 0.24). Random tokens, as the browser labs and
Olsson et al. (2022) use, so that nothing but in-context copying predicts the repeats.
"""

from dataclasses import dataclass
from pathlib import Path

import torch

from tokenization import BPETokenizer, read_texts
from training.data import TokenStream, load_table, step_generator

DATA = Path("../shared/data/imdb/unsupervised.parquet")
TRAIN_REVIEWS, VAL_REVIEWS = 6000, 400  # the first reviews train, the last ones are held out
VAL_BATCHES = 2  # held-out batches of 32 windows: 4,096 tokens
VOCAB = 2048  # the small models' own BPE vocabulary, trained on the training reviews: a quarter of the
# shipped 8,192, so the output layer (a quarter of the compute instead of two thirds) leaves the steps to the blocks
COPYING = 21  # the length of the random run a copying window repeats (three times in a 64-token window)


@dataclass
class WhyData:
    tokenizer: BPETokenizer  # `VOCAB` tokens, trained on the training reviews only
    train: TokenStream
    val: list[dict]  # fixed held-out batches {"input_ids", "targets"}, (32, T) each
    block_size: int
    copying: bool
    pool: torch.Tensor  # the ordinary token ids a random run draws from
    about: str  # what the held-out loss is measured on, in words

    def batch(self, seed: int, step: int, size: int) -> dict:
        """Batch `step` of seed `seed`: random review windows; with `copying`, its second half
        replaced by repeated random runs."""
        g = step_generator(seed, step)
        b = self.train.random_batch(size, self.block_size, g)
        if self.copying:
            half = size // 2
            ids = repeated_runs(self.pool, half, self.block_size + 1, g)
            b = {"input_ids": torch.cat([b["input_ids"][:half], ids[:, :-1]]),
                 "targets": torch.cat([b["targets"][:half], ids[:, 1:]])}
        return b


def repeated_runs(pool: torch.Tensor, n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """(n, length): each row a run of `COPYING` random ids from `pool`, repeated until `length`."""
    runs = pool[torch.randint(len(pool), (n, COPYING), generator=g)]
    return runs.repeat(1, -(-length // COPYING))[:, :length]


def load_why_data(block_size: int, copying: bool = False, path: Path = DATA, n_train: int = TRAIN_REVIEWS,
                  n_val: int = VAL_REVIEWS) -> WhyData:
    """The first `n_train` reviews of `path` for training, its last `n_val` held out; a `VOCAB`-token
    tokenizer trained on the training reviews (deterministic: the same file every run), each part
    tokenized once (the token cache); held-out windows cut evenly from the held-out stream."""
    texts = read_texts(list(load_table(path)["text"]))
    tokenizer = BPETokenizer.train(texts[:n_train], VOCAB)
    train = TokenStream.from_texts(texts[:n_train], tokenizer)
    val_stream = TokenStream.from_texts(texts[-n_val:], tokenizer)
    windows = [torch.cat([x, y[:, -1:]], 1) for x, y in val_stream.windows(block_size, VAL_BATCHES * 32, 32)]
    specials = {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id}
    pool = torch.tensor([i for i in range(tokenizer.vocab_size) if i not in specials])
    about = f"{VAL_BATCHES * 32} windows of {block_size} tokens from {n_val} held-out IMDB reviews"
    if copying:
        g = torch.Generator().manual_seed(12345)
        runs = repeated_runs(pool, VAL_BATCHES * 16, block_size + 1, g)
        windows = [torch.cat([w[:16], runs[i * 16:(i + 1) * 16]]) for i, w in enumerate(windows)]
        about = (f"{VAL_BATCHES * 32} windows of {block_size} tokens: half from {n_val} held-out IMDB reviews, "
                 f"half a random run of {COPYING} tokens repeated (other runs than training's)")
    val = [{"input_ids": w[:, :-1].contiguous(), "targets": w[:, 1:].contiguous()} for w in windows]
    return WhyData(tokenizer, train, val, block_size, copying, pool, about)

