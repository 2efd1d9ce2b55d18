"""The file names of a checkpoint folder, in the Hugging Face layout, spelled once for every package.

    checkpoints/lm/
        config.json           CONFIG_NAME       the architecture (model_type + config dataclass fields)
        classifier.json       CLASSIFIER_NAME   a classifier's labels, cut and temperatures (`ClassifierConfig`)
        model.safetensors     WEIGHTS_NAME      the weights, safetensors only (no pickle)
        tokenizer.json        TOKENIZER_NAME    the BPE tokenizer the model was trained with
        metrics.json          METRICS_NAME      what the training run measured, and its commands
        training_curve.png    CURVE_NAME        the loss curve
        trainer_state.pt      STATE_NAME        optimizer + RNG state, to resume a run
        README.md             CARD_NAME         the model card (Hugging Face YAML metadata + text)
        RUN_IN_PROGRESS       IN_PROGRESS_NAME  present while a training run writes into the folder
"""

CONFIG_NAME = "config.json"
CLASSIFIER_NAME = "classifier.json"  # beside config.json in a classifier's folder only
WEIGHTS_NAME = "model.safetensors"
TOKENIZER_NAME = "tokenizer.json"
METRICS_NAME = "metrics.json"
CURVE_NAME = "training_curve.png"
STATE_NAME = "trainer_state.pt"
CARD_NAME = "README.md"
IN_PROGRESS_NAME = "RUN_IN_PROGRESS"  # written when a run starts, removed once metrics.json is written
