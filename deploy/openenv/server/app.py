"""The ASGI app (``uvicorn server.app:app``): the environment named by $CLINENV_ENV_ID
(default EGIP-Demo-v0, the bundled demo cases), at most $CLINENV_MAX_SESSIONS (default
64) concurrent sessions; datasets from $CLINENV_DATA_DIR as for every clinenv run."""

import os

from clinenv.integrations.openenv import create_clin_app

app = create_clin_app(os.environ.get("CLINENV_ENV_ID", "EGIP-Demo-v0"),
                      max_sessions=int(os.environ.get("CLINENV_MAX_SESSIONS", "64")))
