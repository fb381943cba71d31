"""The report: tables and verdicts (`analysis`), the rules scan's landscape (`landscape`), plots, the summary's files and CLI (`summary`). pandas and matplotlib; never RLlib."""
