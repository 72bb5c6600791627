"""The console's ACL page in a real headless Chromium, on a broker with an authorizer and HTTP logins."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kafkacompat.security import acls
from kafkacompat.testing import Broker

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
CHROMIUM = os.environ.get("KAFKACOMPAT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
AXE = Path(__file__).parent / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
USERS = {"admin": "admin-secret", "bob": "bob-secret"}


@pytest.mark.slow  # a real Chromium
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (tests/run.sh installs it)")
def test_an_admin_adds_and_removes_an_acl_and_bob_is_not_offered_it() -> None:
    with Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0"], authorizer=True,
                super_users=["User:admin"], http_port=0) as broker, \
            playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        admin = browser.new_context(http_credentials={"username": "admin", "password": "admin-secret"},
                                    bypass_csp=True).new_page()  # bypass only so axe-core can be injected
        admin.set_default_timeout(15_000)
        admin.goto(broker.http_url + "/console/acls")
        form = admin.locator("#add-acl")
        form.get_by_label("Principal").fill("User:dave")
        form.get_by_label("Operation").select_option("READ")
        form.get_by_label("Resource type").select_option("TOPIC")
        form.get_by_label("Resource name").fill("orders-")
        form.get_by_label("Pattern").select_option("PREFIXED")
        form.get_by_role("button", name="Add ACL").click()
        expect(admin.locator("#acl-done")).to_have_text("ACL added.")
        row = admin.locator("#acls tbody tr", has_text="User:dave")
        expect(row.locator("td[data-label='Pattern']")).to_have_text("PREFIXED")
        binding = acls.AclBinding(acls.ResourceType.TOPIC, "orders-", acls.PatternType.PREFIXED, "User:dave", "*",
                                  acls.Operation.READ, acls.Permission.ALLOW)
        assert binding in set(broker.server.cluster.authorizer.acls)
        if AXE.exists():
            admin.add_script_tag(path=str(AXE))
            found = admin.evaluate("axe.run(document).then(r => r.violations.filter(v => "
                                   "['serious', 'critical'].includes(v.impact)).map(v => v.id))")
            assert not found, found
        shots = Path(tempfile.mkdtemp(prefix="kafkacompat-console-acls-", dir=os.environ.get("KAFKACOMPAT_ARTIFACTS_DIR")))
        admin.screenshot(path=str(shots / "acls.png"), full_page=True)
        row.get_by_role("button", name="Remove").click()
        expect(admin.locator("#acl-done")).to_have_text("ACL removed.")
        expect(admin.locator("#acls")).not_to_contain_text("User:dave")
        assert binding not in set(broker.server.cluster.authorizer.acls)

        bob = browser.new_context(http_credentials={"username": "bob", "password": "bob-secret"}).new_page()
        answer = bob.goto(broker.http_url + "/console/acls")
        assert answer is not None and answer.status == 403
        expect(bob.locator("#acls-refused")).to_contain_text("authorization")
        assert bob.locator("#add-acl").count() == 0  # what bob may not do is not offered
        browser.close()
