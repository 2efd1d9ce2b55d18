"""The text `training.why` trains its small models on: IMDB reviews, the same batches for every arm.

Every arm of one seed reads the same windows in the same order (`WhyData.batch(seed, step)`), so the
two arms differ in their one switch and nothing else. With `copying`, every window is instead a run
of random tokens shown again and again (`repeated_runs`): text that rewards copying what followed an
earlier occurrence of the current token, which the reviews alone reward too rarely for an induction
head to form in a few hundred steps (measured: fine-tuning the shipped LM on reviews with repeated
passages lifted its best induction score only from 0.14 to 0.24). Random tokens, as the browser labs
and Olsson et al. (2022) use, so that nothing but in-context copying predicts the repeats; and a run
length drawn anew for each window (`PERIODS`), so that no fixed look-back (a head reading the token
21 places back) can stand in for finding the earlier occurrence.
"""

from dataclasses import dataclass
from pathlib import Path

import torch

from tokenization import BPETokenizer, clean_texts
from training.data import TokenStream, load_table, step_generator

DATA = Path("../shared/data/imdb/unsupervised.parquet")
TRAIN_REVIEWS, VAL_REVIEWS = 6000, 400  # the first reviews train, the last ones are held out
VAL_BATCHES = 2  # held-out batches of 32 windows: 4,096 tokens
VOCAB = 2048  # the small models' own BPE vocabulary, trained on the training reviews: a quarter of the
# shipped 8,192, so the output layer (a quarter of the compute instead of two thirds) leaves the steps to the blocks
PERIODS = (10, 31)  # the shortest and longest random run a copying window repeats (2 to 6 times in 64 tokens);
# runs up to 40 tokens formed the head far slower (best score 0.14 after 4,000 steps, against 0.85-0.96 here)


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
        """Batch `step` of seed `seed`: random review windows, or with `copying` repeated random runs."""
        g = step_generator(seed, step)
        if self.copying:
            ids = repeated_runs(self.pool, size, self.block_size + 1, g)
            return {"input_ids": ids[:, :-1], "targets": ids[:, 1:]}
        return self.train.random_batch(size, self.block_size, g)


def repeated_runs(pool: torch.Tensor, n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """(n, length): each row a run of random ids from `pool`, of a length drawn from `PERIODS`,
    repeated until `length`."""
    periods = torch.randint(PERIODS[0], PERIODS[1] + 1, (n, 1), generator=g)
    runs = pool[torch.randint(len(pool), (n, PERIODS[1]), generator=g)]
    return runs.gather(1, torch.arange(length)[None] % periods)


def load_why_data(block_size: int, copying: bool = False, path: Path = DATA, n_train: int = TRAIN_REVIEWS,
                  n_val: int = VAL_REVIEWS) -> WhyData:
    """The first `n_train` reviews of `path` for training, its last `n_val` held out; a `VOCAB`-token
    tokenizer trained on the training reviews (deterministic: the same file every run), each part
    tokenized once (the token cache); held-out windows cut evenly from the held-out stream."""
    texts = clean_texts(list(load_table(path)["text"]))
    tokenizer = BPETokenizer.train(texts[:n_train], VOCAB)
    train = TokenStream.from_texts(texts[:n_train], tokenizer)
    val_stream = TokenStream.from_texts(texts[-n_val:], tokenizer)
    windows = [torch.cat([x, y[:, -1:]], 1) for x, y in val_stream.windows(block_size, VAL_BATCHES * 32, 32)]
    specials = {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id}
    pool = torch.tensor([i for i in range(tokenizer.vocab_size) if i not in specials])
    about = f"{VAL_BATCHES * 32} windows of {block_size} tokens from {n_val} held-out IMDB reviews"
    if copying:
        runs = repeated_runs(pool, VAL_BATCHES * 32, block_size + 1, torch.Generator().manual_seed(12345))
        windows = list(runs.split(32))
        about = (f"{VAL_BATCHES * 32} windows of {block_size} tokens, each a run of {PERIODS[0]} to {PERIODS[1]} "
                 "random tokens repeated (other runs than training's)")
    val = [{"input_ids": w[:, :-1].contiguous(), "targets": w[:, 1:].contiguous()} for w in windows]
    return WhyData(tokenizer, train, val, block_size, copying, pool, about)

