"""The console's ACL and SCRAM user pages in a real headless Chromium, on a broker with an authorizer and HTTP logins."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from kafkacompat.security import acls
from kafkacompat.testing import Broker
from tests.http.console_kit import CHROMIUM, accessible

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
USERS = {"admin": "admin-secret", "bob": "bob-secret"}



@pytest.mark.slow  # a real Chromium
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (tests/run.sh installs it)")
def test_an_admin_manages_acls_and_users_and_bob_is_not_offered_it() -> None:
    with Broker(sasl=USERS, listeners=["SASL_PLAINTEXT://127.0.0.1:0"], authorizer=True,
                super_users=["User:admin"], http_port=0) as broker, \
            playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        admin = browser.new_context(http_credentials={"username": "admin", "password": "admin-secret"},
                                    bypass_csp=True).new_page()  # bypass only so axe-core can be injected
        admin.set_default_timeout(15_000)
        admin.goto(broker.http_url + "/")
        admin.get_by_role("link", name="ACLs").click()
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
        accessible(admin)
        shots = Path(tempfile.mkdtemp(prefix="kafkacompat-console-acls-", dir=os.environ.get("KAFKACOMPAT_ARTIFACTS_DIR")))
        admin.screenshot(path=str(shots / "acls.png"), full_page=True)
        row.get_by_role("button", name="Remove").click()
        expect(admin.locator("#acl-done")).to_have_text("ACL removed.")
        expect(admin.locator("#acls")).not_to_contain_text("User:dave")
        assert binding not in set(broker.server.cluster.authorizer.acls)

        admin.goto(broker.http_url + "/console/users")
        expect(admin.locator("#users")).to_contain_text("bob")
        form = admin.locator("#add-user")
        form.get_by_label("User").fill("erin")
        form.get_by_label("Password").fill("erin-secret")
        form.get_by_label("Mechanism").select_option("SCRAM-SHA-512")
        form.get_by_role("button", name="Save user").click()
        expect(admin.locator("#user-done")).to_have_text("erin: SCRAM-SHA-512 set.")
        expect(admin.locator("#users tbody tr", has_text="erin")).to_contain_text("SCRAM-SHA-512 (4096 iterations)")
        accessible(admin)
        admin.screenshot(path=str(shots / "users.png"), full_page=True)
        from confluent_kafka.admin import AdminClient  # erin logs in to the Kafka port with the new password
        erin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "erin",
                            "sasl.password": "erin-secret"})
        erin.list_topics(timeout=15)  # raises unless the login worked
        admin.get_by_role("button", name="Remove SCRAM-SHA-512 of erin").click()
        expect(admin.locator("#user-done")).to_have_text("erin: SCRAM-SHA-512 removed.")
        expect(admin.locator("#users")).not_to_contain_text("erin")

        bob = browser.new_context(http_credentials={"username": "bob", "password": "bob-secret"}).new_page()
        answer = bob.goto(broker.http_url + "/console/acls")
        assert answer is not None and answer.status == 403
        expect(bob.locator("#acls-refused")).to_contain_text("authorization")
        assert bob.locator("#add-acl").count() == 0  # what bob may not do is not offered
        assert bob.get_by_role("link", name="ACLs").count() == 0 and bob.get_by_role("link", name="Users").count() == 0
        assert bob.goto(broker.http_url + "/console/users").status == 403
        assert bob.locator("#add-user").count() == 0
        browser.close()
