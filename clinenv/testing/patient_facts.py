"""Hand-written patient facts in AgentClinic's ``Patient_Actor`` form, for the tests of
the retrieval patient and its personas."""

from __future__ import annotations

#: A 58-year-old man with crushing chest pain: demographics, history, symptoms, past
#: history, medications, social and family history, allergies.
CHEST_PAIN = {
    "Demographics": "58-year-old man",
    "History": (
        "The patient reports crushing chest pain that started 2 hours ago while shoveling "
        "snow. The pain radiates to his left arm. He denies any prior episodes."
    ),
    "Symptoms": {
        "Primary_Symptom": "Crushing chest pain",
        "Secondary_Symptoms": ["Sweating", "Nausea", "Shortness of breath"],
    },
    "Past_Medical_History": "Hypertension and hyperlipidemia.",
    "Current_Medications": ["Lisinopril 10 mg daily", "Atorvastatin 40 mg nightly"],
    "Social_History": (
        "Smokes one pack of cigarettes per day for 30 years. Drinks two beers on weekends. "
        "Works as an accountant."
    ),
    "Family_History": "His father had a heart attack at age 55.",
    "Allergies": "Penicillin causes a rash.",
}
