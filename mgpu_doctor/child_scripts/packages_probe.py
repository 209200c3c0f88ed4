"""Child script: the diagnosed interpreter and the distributions installed in it.

Python 3.6+, standard library only. Prints nothing; writes JSON to $MGPU_DOCTOR_RESULT.
What it reads is `_package_facts.py`'s.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mgpu_child  # noqa: E402

if __name__ == "__main__":
    _mgpu_child.start()  # first: die with the doctor, stacks on SIGUSR1 even in C code

import _package_facts  # noqa: E402


def main():
    _mgpu_child.write_result(_package_facts.facts(sys.path))


if __name__ == "__main__":
    main()
