"""Every public estimator documents each of its parameters (numpydoc style)."""

import inspect
import re

import pytest

import skbayesnn

ESTIMATORS = [
    getattr(skbayesnn, name)
    for name in skbayesnn.__all__
    if inspect.isclass(getattr(skbayesnn, name))
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.__name__)
def test_every_parameter_is_documented(estimator):
    doc = inspect.getdoc(estimator)
    assert doc, f"{estimator.__name__} has no docstring"
    assert "Parameters\n----------" in doc
    params = [p for p in inspect.signature(estimator.__init__).parameters if p != "self"]
    missing = [p for p in params if f"\n{p} :" not in doc]
    assert not missing, f"{estimator.__name__} does not document {missing}"


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.__name__)
def test_parameters_are_documented_in_signature_order(estimator):
    # numpydoc (and sklearn's own docstring check) expect the signature's order.
    doc = inspect.getdoc(estimator)
    section = doc.split("Parameters\n----------\n", 1)[1]
    section = re.split(r"\n\w[\w ]*\n-{3,}\n", section, maxsplit=1)[0]
    documented = re.findall(r"^(\w+) :", section, flags=re.MULTILINE)
    params = [p for p in inspect.signature(estimator.__init__).parameters if p != "self"]
    assert documented == params
