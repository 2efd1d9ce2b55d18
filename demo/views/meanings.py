"""Same word, two meanings (`inspection.meanings`) on the served LM: one word in a first sentence, in a
second where it means something else, and in a third where it means what it meant in the first (the
control), its vectors compared after every layer. No Gradio here."""

from dataclasses import dataclass

from demo.serving import DemoError, DemoService, visitor_text
from inspection.meanings import two_meanings

EXAMPLE = ("play", "The play was staged at a small theatre", "The kids went outside to play",
           "We saw a play at the theatre last night")


@dataclass
class Meanings:
    word: str
    depths: list[str]
    other: list[float]  # cosine, first sentence vs the other meaning, at each depth
    same: list[float]  # cosine, first sentence vs the same meaning

    def summary(self) -> str:
        return (f"At the embedding the two “{self.word}” vectors are almost the same (cosine {self.other[0]:.2f}: "
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
    return Meanings(texts[0].strip(), [d.depth for d in a], [d.cosine for d in a], [d.cosine for d in b])
