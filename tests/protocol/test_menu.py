"""The menu B: priority order, exclusion of requested exams, the limit."""

from __future__ import annotations

import pytest

from clinenv.protocol import config as cfg
from clinenv.protocol.catalog import Catalog
from clinenv.protocol.menu import build_menu, menu_order
from clinenv.protocol.runtime import EGIPRuntime


def test_menu_priority_exclusion_and_limit(gbs_records, gbs_case):
    catalog = Catalog(gbs_records)
    order = menu_order(catalog)
    ids = [e.exam_id for e in build_menu(order, requested=[], limit=None)]
    # vital signs first, other exam sections, basic labs, other labs, imaging, procedures
    assert ids == ["PE2", "PE1", "T3", "T6", "T1", "T2", "T4", "T5"]
    assert [e.exam_id for e in build_menu(order, ["PE2", "T3"], limit=3)] == ["PE1", "T6", "T1"]
    with pytest.raises(ValueError):
        build_menu(order, [], limit=-1)
    rt = EGIPRuntime(gbs_case, cfg.ProtocolConfig(menu_limit=2))
    assert [e.exam_id for e in rt.menu()] == ["PE2", "PE1"]  # the runtime's menu is B
