"""Map the design card's folders to import names that cannot collide in site-packages.

`core/` installs as `frost_core` and `plugins/` as `frost_plugins`; pyproject.toml holds
everything else. Subpackages are found, so adding one needs no edit here.
"""

from setuptools import find_packages, setup

FOLDER_TO_PACKAGE = {"frost_tui": "frost_tui", "core": "frost_core", "plugins": "frost_plugins"}

packages = []
for folder, name in FOLDER_TO_PACKAGE.items():
    packages.append(name)
    packages += [name + sub[len(folder):] for sub in find_packages(include=[f"{folder}.*"])]

setup(
    packages=packages,
    package_dir={name: folder for folder, name in FOLDER_TO_PACKAGE.items()},
    package_data={"frost_tui": ["*.tcss"], "frost_plugins": ["*.py"]},
)
