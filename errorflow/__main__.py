import sys

from errorflow.cli.main import main

sys.exit(main())
