"""The exam catalog A of a hand-built case: ids, names, groups and source paths."""

from __future__ import annotations

from clinenv.protocol.catalog import Catalog


def test_catalog_ids_names_and_groups(gbs_records):
    catalog = Catalog(gbs_records)
    rows = [(e.exam_id, e.name, e.group, e.source_path) for e in catalog]
    assert rows == [
        ("PE1", "Neurological Examination", None, ("physical_exam", "Neurological_Examination")),
        ("PE2", "Vital Signs", None, ("physical_exam", "Vital_Signs")),
        ("T1", "MRI Brain", "Imaging", ("tests", "Imaging", "MRI_Brain")),
        ("T2", "MRI Spine", "Imaging", ("tests", "Imaging", "MRI_Spine")),
        ("T3", "Complete Blood Count", None, ("tests", "Complete_Blood_Count")),
        ("T4", "Lumbar Puncture", None, ("tests", "Lumbar_Puncture")),
        ("T5", "Nerve Conduction Studies", None, ("tests", "Nerve_Conduction_Studies")),
        ("T6", "ESR", None, ("tests", "ESR")),
    ]
    assert [e.index for e in catalog] == list(range(8))
    assert catalog.get("t3").name == "Complete Blood Count"
