"""Repository-level conftest: nothing to configure; the plugin is loaded through its
pytest11 entry point once installed (``pip install -e .``)."""
