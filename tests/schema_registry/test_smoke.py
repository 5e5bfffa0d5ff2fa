import json

import requests


def test_register_get_lookup(schema_registry):
    url = schema_registry.url
    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    r = requests.post(f"{url}/subjects/t-value/versions", json={"schema": schema}, timeout=10)
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    assert requests.get(f"{url}/schemas/ids/{sid}", timeout=10).json()["schema"]
    assert requests.get(f"{url}/subjects", timeout=10).json() == ["t-value"]
