"""Same word, two meanings (`inspection.meanings`) on the served LM: one word in a first sentence, in a
second where it means something else, and in a third where it means what it meant in the first (the
control), its vectors compared after every layer. No Gradio here."""

from dataclasses import dataclass

from demo.serving import DemoError, DemoService, visitor_text
from inspection.meanings import two_meanings

# the words that settle the meaning come before the word: a causal model's vector of a word reads only those
EXAMPLE = ("play", "We bought tickets for the play", "The kids went outside to play", "The actors rehearsed the play")


def before_word(sentence: str, word: str) -> str:
    """The words of `sentence` before the first `word` in it: all a causal model's vector of `word` has read."""
    at = f" {sentence} ".lower().find(f" {word.lower()}")
    return sentence[:max(at, 0)].strip()


@dataclass
class Meanings:
    word: str
    depths: list[str]
    other: list[float]  # cosine, first sentence vs the other meaning, at each depth
    same: list[float]  # cosine, first sentence vs the same meaning
    seen: list[str] = ()  # each sentence's words before the word: what its vector has read

    def summary(self) -> str:
        read = "; ".join(f"“{s}”" if s else "nothing" for s in self.seen)
        causal = (f"This model is causal: the vector of “{self.word}” is built from the words before it only (here "
                  f"{read}), so the words that settle its meaning must come before it. ") if self.seen else ""
        return causal + (
            f"At the embedding the two “{self.word}” vectors are almost the same (cosine {self.other[0]:.2f}: "
            f"one row of the table, moved only by the position). After the last layer the other meaning has "
            f"drifted to {self.other[-1]:.2f}, the same meaning in another sentence to {self.same[-1]:.2f}"
            + (": the layers tell the meanings apart." if self.other[-1] < self.same[-1] - 0.1 else
               ": this model keeps the two about as close as any two contexts."))


def meanings(service: DemoService, word: object, first: object, other: object, same: object) -> Meanings:
    """The cosines of `word` between `first` and `other`, and between `first` and `same`, at every depth."""
    texts = [visitor_text(t)[0] for t in (word, first, other, same)]
    if not all(texts):
        raise DemoError("Give a word and three sentences that contain it.")
    model, tok = service.lm.require()
    with service.compute():
        try:
            a = two_meanings(model, tok, texts[0], texts[1], texts[2])
            b = two_meanings(model, tok, texts[0], texts[1], texts[3])
        except ValueError as e:
            raise DemoError(str(e)) from None
    return Meanings(texts[0].strip(), [d.depth for d in a], [d.cosine for d in a], [d.cosine for d in b],
                    [before_word(t, texts[0].strip()) for t in texts[1:]])
