"""bilevel_tune: a bilevel mechanism-design study runner (ES outer loop, RLlib APPO inner loop, Ray Tune)."""

__version__ = "0.3.0"
