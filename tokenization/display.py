"""Token ids as a person can read them: for heatmap labels, token tables and tokenizer views.

Byte-level BPE stores tokens as strings of printable stand-ins for bytes, and decodes a token that
holds only part of a multi-byte character (emoji, CJK) to U+FFFD, which makes all such tokens look
alike. `token_label` shows those as their bytes instead, and `visible` gives control characters a
symbol, so no label is empty or invisible.
"""

import functools

from tokenization.bpe import BPETokenizer

_CONTROL_PICTURES = {"\n": "↵", "\t": "⇥", "\r": "␍", "\x7f": "␡"}


def visible(token: str, show_spaces: bool = False) -> str:
    """Token text with control characters (NUL, newline, ...) replaced by visible symbols.

    Heatmap labels also show spaces as "␣": " the" and "the" are different tokens and a plain
    space at the start of a rotated label would be invisible.
    """
    out = []
    for ch in token:
        if ch in _CONTROL_PICTURES:
            out.append(_CONTROL_PICTURES[ch])
        elif ord(ch) < 32:
            out.append(chr(0x2400 + ord(ch)))  # U+2400 block: ␀ ␁ ...
        elif ch == " " and show_spaces:
            out.append("␣")
        else:
            out.append(ch)
    return "".join(out)


@functools.cache
def byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's `bytes_to_unicode`, the byte <-> printable character map that
    byte-level BPE uses to store tokens as strings in tokenizer.json."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def token_label(tokenizer: BPETokenizer, token_id: int) -> str:
    """Display text of one token id.

    A token holding only part of a multibyte character decodes to U+FFFD; it is shown as its
    bytes instead, e.g. `⟨f0 9f⟩`. Ids the tokenizer lacks (a padded vocabulary) show as `<id>`.
    """
    try:
        text = tokenizer.decode_token(token_id)
    except ValueError:
        return f"<{token_id}>"
    if "\ufffd" in text:
        raw = tokenizer.tokenizer.id_to_token(token_id) or ""
        decoder = byte_decoder()
        if raw and all(ch in decoder for ch in raw):
            data = bytes(decoder[ch] for ch in raw)
            if data.decode("utf-8", "replace") == text:  # genuinely partial, not a literal U+FFFD
                return "⟨" + " ".join(f"{b:02x}" for b in data) + "⟩"
    return text
