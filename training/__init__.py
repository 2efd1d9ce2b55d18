"""Training and evaluation of the models in `model/` on IMDB (or any text table).

Entry points: `python -m training.run` and `python -m training.evaluate`.
"""
