"""How the user trains: the training profile, declared in files or options, or observed from a model.
May import matrix.vocabulary, matrix.toml_files and resolve (profile.py: nothing); not checks or cli."""
