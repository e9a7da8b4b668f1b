import sys

from errorflow.cli import main

sys.exit(main())
