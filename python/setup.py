# The package finds the dpc compiler of the repository it was installed from: the build writes that
# repository's path into dpc/_where.py (pip builds a local folder in place, so this file's folder is
# the repository's python/).
import os
from setuptools import setup
from setuptools.command.build_py import build_py


class WithWhere(build_py):
    def run(self):
        super().run()
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        target = os.path.join(self.build_lib, "dpc", "_where.py")
        with open(target, "w") as f:
            f.write("# written by setup.py at install: the repository the package came from\n")
            f.write("REPO = %r\n" % repo)


setup(cmdclass={"build_py": WithWhere})
