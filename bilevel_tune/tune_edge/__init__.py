"""The Tune edge: one trial = one ES run (`trainable`), the Tuner (`experiment`), W&B and Tune's loggers (`tracking`)."""
