"""The Python quick start: a realm file, a schema, a write transaction, a query.

Run: python examples/quickstart.py [path]   (with the atoll package installed, or ATOLL_LIBRARY
and PYTHONPATH=bindings/python/src set, as `make demo` does)
"""
import datetime
import sys

import atoll

path = sys.argv[1] if len(sys.argv) > 1 else "python-example.realm"
schema = [
    {"name": "Person", "primaryKey": "_id", "properties": {"_id": "string", "name": "string"}},
    {"name": "Dog", "primaryKey": "_id",
     "properties": {"_id": "int", "name": "string", "age": {"type": "int", "optional": True, "indexed": True},
                    "owner": "Person?", "born": "date?", "tags": "string[]"}},
]

with atoll.open(path, schema=schema, schema_version=1) as realm:
    with realm.write():
        realm.create("Dog", {"_id": 1, "name": "Rex", "age": 3, "owner": {"_id": "ann", "name": "Ann"},
                             "born": datetime.datetime(2023, 5, 1, tzinfo=datetime.timezone.utc),
                             "tags": ["good", "loud"]}, update="modified")
        rows = [{"_id": i, "name": f"Dog {i}", "age": i * 2, "owner": "ann"} for i in range(2, 6)]
        realm.create_many("Dog", rows, update="modified")
    print(f"wrote 5 dogs to {path} (change log version {realm.version})")
    older = realm.objects("Dog").filter("age > $0 AND owner.name == 'Ann' SORT(age DESC)", 4)
    print(f"dogs older than 4 owned by Ann: {len(older)}")
    for dog in older:
        print(f"  {dog['name']} is {dog['age']}")
    rex = realm.get("Dog", 1)
    print(f"Rex was born {rex['born']:%Y-%m-%d}; tags {rex['tags']}")
