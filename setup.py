"""The one thing pyproject.toml cannot say: the top-level studies/ folder ships as the package `bilevel_tune.studies`."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["bilevel_tune", "bilevel_tune.*"]), "bilevel_tune.studies"],
    package_dir={"bilevel_tune.studies": "studies"},
)
