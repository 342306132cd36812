"""Test helpers that ship with the package (as numpy.testing does): the fake provider HTTP
server (``fakeserver.py``) and the fork server that starts the tests' processes from one that
has imported their libraries (``zygote.py``). Nothing in the product imports this folder."""
