"""Test helpers that ship with the package (as numpy.testing does): the fake provider HTTP
server (``fakeserver.py``). Nothing in the product imports this folder."""
