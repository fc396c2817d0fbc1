project = "skbayesnn"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
numpydoc_show_class_members = False
sphinx_gallery_conf = {"examples_dirs": "../examples", "gallery_dirs": "auto_examples"}
html_theme = "alabaster"
