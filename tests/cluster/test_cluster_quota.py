"""A user's storage quota across API hosts on different database nodes: each
reservation is one conditional UPDATE, so parallel uploads through both hosts
cannot pass the quota together (two nodes' updates of the user's row meet in
certification, and the one run again sees the other's bytes)."""
import concurrent.futures

from conftest import new_user

MB = 1024 * 1024


def test_quota_holds_against_reservations_through_both_hosts(cluster):
    c = new_user("free")  # 100 MB
    hosts = [c, c.on("b")]
    size = 20 * MB  # five fit exactly

    def reserve(i):
        return hosts[i % 2].post("/files/presigned-upload", json={
            "filename": f"part{i}.bin", "size_bytes": size,
            "content_type": "application/octet-stream"}).status_code
    with concurrent.futures.ThreadPoolExecutor(12) as ex:
        codes = sorted(ex.map(reserve, range(12)))
    assert codes == [201] * 5 + [403] * 7, codes
    for h in hosts:
        assert h.get("/files/usage").json()["total_size_bytes"] == 5 * size
