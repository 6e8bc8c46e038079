"""A minimal stand-in for the `expecttest` module, which Debian 12 does not package and torch 1.13's
torch.testing._internal.common_utils imports: its TestCase, without the inline-expectation rewriting (the distributed
tests never call assertExpectedInline)."""
import unittest

ACCEPT = False  # common_utils reads it: never rewrite expectations


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertEqual(expect.strip(), str(actual).strip())

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertEqual(expect.strip(), str(e).strip())
            return
        self.fail("%s was not raised" % exc_type.__name__)
