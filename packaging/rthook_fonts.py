"""PyInstaller runtime hook: fontconfig (hence Qt, on xcb and offscreen alike) also sees the
fonts shipped in the bundle's fonts/ folder. A FONTCONFIG_FILE the user set wins."""

import os
import sys

_conf = os.path.join(sys._MEIPASS, "fonts", "fonts.conf")
if os.path.isfile(_conf):
    os.environ.setdefault("FONTCONFIG_FILE", _conf)
