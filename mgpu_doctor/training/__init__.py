"""How the user trains: the training profile (declared in a file or options, observed from a model).
May import the matrix vocabulary, the resolved environment and the input readers; not checks, smoke or cli."""
