"""Message passing for Bayesian neural networks (shared/methods/message_passing.md).

One module per factor type, each a set of stateless functions over whole
batches of examples with messages in natural parameters:

* :mod:`.linear` -- fully connected layers (first layer §5.4, hidden layers §5.3);
* :mod:`.activation` -- (leaky) ReLU (§5.6);
* :mod:`.likelihood` -- Gaussian regression (§5.8) and the argmax (§5.11) and
  softmax (§5.9-5.10) classification factors;
* :mod:`.network` -- the MLP engine: priors (§7), per-example message storage
  and the batch schedule with aggregates, damping and iterations (§6), and the
  predictive forward pass (§9).
"""

from . import activation, likelihood, linear  # noqa: F401
