"""``python -m coopsim ...``: the ``coopsim`` command (:func:`coopsim.cli.main`), for a checkout that is not installed
or a venv whose ``bin/`` is not on ``PATH``."""
from coopsim.cli import main

if __name__ == "__main__":
    main()
