"""The `finbench` command's parts: options shared by its commands, and the model commands (`finbench.cli`)."""
