"""Named model + optimisation settings, one dict per task (the task's `presets`: see `training.contract`).
`tiny` runs in seconds (tests, smoke checks); `small` is what the first checkpoints were trained with
on a 2-core CPU (the LM is the reference's 5.3 M-parameter shape); `base` is what the shipped
checkpoints were trained with on one GPU (their metrics.json spells the same settings out as --set
options); `laptop` is ten minutes on a 2-core CPU, measured in docs/experiments/laptop-2026-11-25 (the
LM's steps then a fixed 1,200; now as many as fit its minutes) and docs/training.md.

A preset is `{"model": {...}, "train": {...}, "finetune": {...}}`: `finetune` holds the settings that
replace `train`'s when the model starts from a trained one (`--init-from`). A classifier's preset may add
`"classifier": {...}`, its `classifier.ClassifierConfig` settings (classifier.json, not config.json: how it
cuts a long review); `--set` reaches both.
A fine-tune must never take a from-scratch learning rate or schedule (a sentiment fine-tune of the
shipped LM at the `small` preset's 1e-3 stays at chance); `{}` says the preset's `train` settings are
already a fine-tune's (`base`: the shipped classifier was trained with them, from the shipped LM).
`train["recipe"]` holds `training.recipe.Recipe` fields. Every flag given on the command line wins.
"""

# the sentiment and span-corruption tasks share their tiny shape (a classifier can start from a span model)
ENCODER_DECODER_TINY = {"model": dict(n_encoder_layer=1, n_decoder_layer=1, n_head=2, d_model=64, d_ff=256,
                                      max_src_len=128, max_tgt_len=8, dropout=0.0),
                        "train": dict(batch_size=16, max_steps=60, lr=3e-3, warmup_steps=10, eval_every=20,
                                      eval_batches=8),
                        "finetune": dict(lr=1e-3, warmup_steps=10)}

# ten minutes on a 2-core CPU, start-up and final evaluation included (`max_minutes` bounds the whole
# run; bf16 where the CPU has it). The LM's shape, batch and learning rate were chosen by the runs in
# docs/experiments/laptop-2026-11-25; the classifier is ULMFiT's fine-tuning of the causal encoder
# (docs/experiments/sentiment-recipe-2026-11-25, `ulmfit-nolm`), from the shipped LM (--init-from checkpoints/lm)
# The same settings serve any text (`--data`). Dropout only when the minutes would read the training
# tokens more than 16 times (`repeat_dropout`, `training.budget.REPEAT_PASSES`): on 1 MB of Shakespeare,
# 29 passes at 9 minutes scored 1.944 bits/byte with dropout 0.1 against 2.004 without, and 8 passes at
# 3 minutes 2.140 against 2.003 (a CPU step under dropout is 60-70% slower; read 14 times by a fixed
# 1,200 steps, dropout 0.19 scored 2.022 against 1.967): docs/experiments/own-text-budgets-2026-12-03
# Its steps are not a fixed count (max_steps None): the run times its first steps and fits the count,
# and with it the learning rate's decay, to max_minutes (`training.budget.TimeBudget.size`), so
# a fast machine trains longer and a slow one ends its schedule in time; --max-steps N still fixes them.
# Its schedule is warmup-stable-decay: the peak rate held until the last 20% of the steps, so the count
# is re-fitted to the steps the run takes until the decay starts, and the decay starts early when the
# held-out loss stops improving (`TimeBudget.refit`, `TimeBudget.cool_down`). On 1 MB of Shakespeare
# (docs/experiments/own-text-wsd-2026-12-02, a 2-core AMX Xeon): at 3 minutes 2.012 bits/byte against
# 2.057 with cosine fitted the same way and 2.033 for the old fixed 1,200 cut by the deadline; at 9,
# 1.979 in 6:05 (decay from step 1,200, where the held-out loss rose) against cosine's 1.973 in 8:33
LAPTOP_LM = {"model": dict(n_layer=4, n_head=4, d_model=192, d_ff=768, block_size=256, dropout=0.0),
             "train": dict(batch_size=16, max_steps=None, lr=2e-3, warmup_steps=50, eval_every=200,
                           eval_batches=40, max_minutes=9.0, recipe=dict(schedule="wsd", repeat_dropout=0.1))}
# The fine-tune keeps a fixed 300 steps, not fitted to its minutes as the LM's are: one more layer group
# trains every 25 steps, so its steps grow dearer (0.54 s over the first 75, 0.68-0.69 s after, in
# docs/experiments/own-text-wsd-2026-12-02/ts-sent) and steps timed at the start would fit over a
# quarter too many; its slanted triangular decay starts after the 30 warmup steps, so the count cannot
# be re-fitted later as wsd's is; and the 300 fit the minutes: 3:48 from a 4 x 192 LM (that run), 4:41-8:16
# from checkpoints/lm's 6 x 320 (docs/training.md); the deadline still stops a slower machine
LAPTOP_SENTIMENT = {  # with --init-from checkpoints/lm its encoder is the LM's 6 layers x 320 (this shape: without)
    "model": dict(n_encoder_layer=4, n_decoder_layer=1, n_head=4, d_model=256, d_ff=1024, max_src_len=256,
                  max_tgt_len=8, dropout=0.1, norm_first=True, causal_encoder=True),
    "classifier": dict(src_keep_tail=0),
    "train": dict(batch_size=16, max_steps=300, lr=1e-3, warmup_steps=30, eval_every=75, eval_batches=32,
                  max_tokens=4096, max_minutes=9.0,
                  recipe=dict(schedule="stlr", layer_decay=0.385, unfreeze_every=25, crop_prob=0.3,
                              label_smoothing=0.1, average_last=2)),
    "finetune": dict(lr=1e-3, warmup_steps=30),
}

# an LM's "finetune" settings continue a trained LM's pretraining (`--task lm --init-from`: more steps
# on the same text, or your own text): half the from-scratch peak learning rate, re-warmed briefly and
# decayed again, so the first steps do not undo what the trained model's decayed schedule settled.
# The laptop's continues the shipped 6 x 320 LM (trained at 1.5e-3, batches 4x larger): 5e-4
LM: dict[str, dict] = {
    "tiny": {"model": dict(n_layer=2, n_head=2, d_model=64, d_ff=256, block_size=64, dropout=0.0),
             "train": dict(batch_size=8, max_steps=60, lr=3e-3, warmup_steps=10, eval_every=20,
                           eval_batches=8),
             "finetune": dict(lr=1.5e-3, warmup_steps=5)},
    "small": {"model": dict(n_layer=4, n_head=4, d_model=256, d_ff=1024, block_size=256, dropout=0.0),
              "train": dict(batch_size=16, max_steps=2000, lr=1e-3, warmup_steps=100, eval_every=100,
                            eval_batches=40),
              "finetune": dict(lr=5e-4, warmup_steps=50)},
    "base": {"model": dict(n_layer=6, n_head=5, d_model=320, d_ff=1280, block_size=256, dropout=0.0),
             "train": dict(batch_size=64, max_steps=6000, lr=1.5e-3, warmup_steps=300, eval_every=500,
                           eval_batches=40),
             "finetune": dict(lr=7.5e-4, warmup_steps=100)},
    "laptop": {**LAPTOP_LM, "finetune": dict(lr=5e-4, warmup_steps=25)},
}

SENTIMENT: dict[str, dict] = {
    "tiny": ENCODER_DECODER_TINY,
    "small": {"model": dict(n_encoder_layer=3, n_decoder_layer=1, n_head=4, d_model=192, d_ff=768,
                            max_src_len=256, max_tgt_len=8, dropout=0.1, norm_first=True),
              "train": dict(batch_size=32, max_steps=1500, lr=1e-3, warmup_steps=100, eval_every=100,
                            eval_batches=16),
              "finetune": dict(lr=3e-4, warmup_steps=50)},
    # the shipped classifier's run, with --init-from checkpoints/lm (the encoder's shape comes from the
    # LM): ULMFiT's fine-tuning of the causal encoder, 1,900 steps of up to 16,384 tokens (22 M in
    # all; docs/experiments/sentiment-full-2026-11-25); eval_batches 32 covers the 1,000 selection rows
    "base": {"model": dict(n_encoder_layer=6, n_decoder_layer=1, n_head=5, d_model=320, d_ff=1280,
                           max_src_len=1024, max_tgt_len=8, dropout=0.1, norm_first=True, causal_encoder=True),
             "classifier": dict(src_keep_tail=384),
             "train": dict(batch_size=32, max_steps=1900, lr=1e-3, warmup_steps=190, eval_every=50,
                           eval_batches=32, max_tokens=16384,
                           recipe=dict(schedule="stlr", layer_decay=0.385, unfreeze_every=100, crop_prob=0.3,
                                       label_smoothing=0.1, average_last=2)),
             "finetune": {}},
    "laptop": LAPTOP_SENTIMENT,
}

# span corruption: the sentiment shapes (so a classifier can start from the whole model); `base`
# takes the LM's encoder shape with --init-from checkpoints/lm, and batches of 32 x 1,024 tokens
SPAN: dict[str, dict] = {
    "tiny": ENCODER_DECODER_TINY,
    "base": {"model": dict(n_encoder_layer=6, n_decoder_layer=1, n_head=5, d_model=320, d_ff=1280,
                           max_src_len=1024, max_tgt_len=8, dropout=0.1, norm_first=True),
             "train": dict(batch_size=32, max_steps=6000, lr=5e-4, warmup_steps=300, eval_every=500,
                           eval_batches=20),
             "finetune": {}},
}

SEQ2SEQ: dict[str, dict] = {
    "tiny": {"model": dict(n_encoder_layer=2, n_decoder_layer=2, n_head=2, d_model=64, d_ff=256,
                           max_src_len=64, max_tgt_len=64, dropout=0.0, norm_first=True),
             "train": dict(batch_size=32, max_steps=400, lr=2e-3, warmup_steps=20, eval_every=100,
                           eval_batches=4),
             "finetune": dict(lr=5e-4, warmup_steps=20)},
    "small": {"model": dict(n_encoder_layer=3, n_decoder_layer=3, n_head=4, d_model=256, d_ff=1024,
                            max_src_len=256, max_tgt_len=128, dropout=0.1),
              "train": dict(batch_size=32, max_steps=5000, lr=5e-4, warmup_steps=200, eval_every=250,
                            eval_batches=16),
              "finetune": dict(lr=2e-4, warmup_steps=100)},
}

DEFAULT_PRESET = "small"
# what `training.run --help` says of each preset; every figure comes from a run recorded in docs/
PRESET_HELP = (
    f"model + optimisation settings (default: {DEFAULT_PRESET}): tiny, small, base or laptop (at most 10 min on a "
    "2-core CPU, any text), each in the table below (--print-config: all of one). With --init-from, the learning "
    "rate and schedule are the preset's fine-tune settings")
MEASURED = {  # --help's last column: docs/experiments/laptop-2026-11-25, docs/training.md
    "tiny": "seconds: tests and smoke checks",
    "small": "the first CPU-trained LM: 50 min on 2 cores, fp32 -> 1.82 bits/byte (IMDB)",
    "base": "the shipped models: minutes on one GPU, hours on a CPU",
    "laptop": "<= 10 min on 2 cores, start-up and final evaluation included; lm steps fitted to 9 min "
              "(warmup-stable-decay; dropout 0.1 past 16 passes over the text): 1.929 bits/byte on 1 MB of "
              "Shakespeare (--data) in 8:54 (AMX Xeon), 2.012 with --max-minutes 3; lm 1.80 bits/byte (IMDB) in "
              "8:54; sentiment (300 steps) --init-from checkpoints/lm 89.1% in 4:41",
}


def preset_table() -> str:
    """`training.run --help`'s table of the LM presets (the other tasks' are in this module)."""
    rows = [("preset", "lm: layers x width", "context", "steps x batch", "time limit", "measured")]
    for name, preset in LM.items():
        model, train = preset["model"], preset["train"]
        rows.append((name, f"{model['n_layer']} x {model['d_model']}", str(model["block_size"]),
                     f"{train['max_steps']:,} x {train['batch_size']}" if train["max_steps"] else
                     f"fit to time x {train['batch_size']}",
                     f"{train['max_minutes']:g} min" if train.get("max_minutes") else "-", MEASURED[name]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows]
    return "presets (--preset; the sentiment, span and seq2seq shapes: training/presets.py):\n  " + "\n  ".join(lines)
