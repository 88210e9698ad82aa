"""The declared constructor arguments the packed layers and models share (`tfpack.params`).

One constraint per kind of Keras argument, so that a layer, the block that
builds it and the backbone that builds the block refuse the same values with
the same words:

>>> from tfpack.params import check
>>> check("dropout", 1.5, DROPOUT)
Traceback (most recent call last):
...
tfpack.errors.TfpackError: `dropout` must be a finite number in [0, 1]. Received: dropout=1.5
"""

from tfpack.params import Anything, Integer, Real, Text

__all__ = ["DROPOUT", "DTYPE", "EPSILON", "INITIALIZER", "NAME", "POSITIVE", "WAVELENGTH",
           "WIDTH"]

# A rate of `keras.layers.Dropout`.
DROPOUT = Real(0, 1)
# A layer norm's epsilon, an initializer's stddev: above zero.
EPSILON = POSITIVE = Real(0, None, closed="neither")
# RoPE's base wavelength.
WAVELENGTH = POSITIVE
# Widths and counts: heads, hidden and feed-forward dims, vocabulary rows.
WIDTH = Integer(1)
# A name, an instance or a config dict: `keras.initializers.get` checks it.
INITIALIZER = Anything("a Keras initializer, read by keras.initializers.get")
# A metric's name and the dtype of its accumulators (a name or a policy: Keras reads it).
NAME = Text()
DTYPE = Anything("a Keras dtype or None, read by Keras")
