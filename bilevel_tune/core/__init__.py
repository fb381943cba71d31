"""The numpy core of the search: the ES (`es`), what a season scores (`objective`), metric names (`metrics`), a rules scan's grid (`scan`). No Ray."""
