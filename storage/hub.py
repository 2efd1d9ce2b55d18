"""Where a checkpoint comes from: a local folder first, otherwise a Hugging Face Hub repo.

A Hub repo is fetched with `huggingface_hub.snapshot_download` into the shared Hugging Face cache
(`HF_HUB_CACHE`), so a repo downloaded once loads later without the network. Offline
(`HF_HUB_OFFLINE=1`, or no network), a repo that is not cached fails at once with a message that
says so, instead of a retry loop or a bare HTTP traceback.
"""

import os
from pathlib import Path


def resolve_checkpoint(name_or_path: str | os.PathLike) -> Path:
    """A local checkpoint folder, or the local snapshot of the Hub repo `owner/name`."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if path.exists():
        raise NotADirectoryError(f"{path} is a file; a checkpoint is the folder that holds config.json")
    # imported here: loading a local folder (the app, the tests) never pays for huggingface_hub's import
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalEntryNotFoundError
    from huggingface_hub.utils import validate_repo_id

    repo_id = str(name_or_path)
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise FileNotFoundError(f"no checkpoint folder at {repo_id} (and {repo_id!r} is not a Hub repo id "
                                "of the form owner/name)") from None
    try:
        return Path(snapshot_download(repo_id))
    except LocalEntryNotFoundError:
        raise FileNotFoundError(
            f"{repo_id!r} is not a local folder, and the Hugging Face Hub repo {repo_id!r} is not in the "
            "local cache and cannot be downloaded now (offline: HF_HUB_OFFLINE=1 or no network). "
            "Download it once while online, or pass a local checkpoint folder.") from None
    except HfHubHTTPError as e:  # repository not found, gated, private without a token, server error
        raise FileNotFoundError(f"{repo_id!r} is not a local folder, and the Hugging Face Hub could not "
                                f"provide it: {e}") from None
