"""The table of credential kinds shared by ``tests/kb/test_secret_kinds.py`` and
``bench/secrets_kinds.py``: each kind as a sentence or a line that holds one (a realistic but
fake value), and a harmless near-miss of the same kind (a placeholder, code, a name, a sentence
about the credential) that must not be refused.

Values are generated from templates with a fixed seed, so that the repository holds no string
that another scanner (or a forge's push protection) would take for a live credential:
``{a:36}`` is 36 letters and digits; ``A`` upper case and digits, ``L`` letters, ``l`` lower
case and digits, ``h`` lower-case hex, ``H`` upper-case hex, ``d`` digits, ``u`` URL-safe
base64, ``b`` base64; ``{basic:user:pass}`` is the base64 of ``user:pass``.
"""

from __future__ import annotations

import base64
import random
import re
import string

_ALPHABETS = {
    "a": string.ascii_letters + string.digits,
    "A": string.ascii_uppercase + string.digits,
    "L": string.ascii_letters,
    "l": string.ascii_lowercase + string.digits,
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "d": string.digits,
    "u": string.ascii_letters + string.digits + "_-",
    "b": string.ascii_letters + string.digits + "+/",
}
_FIELD = re.compile(r"\{(basic):([^}]*)\}|\{([aALlhHdub]):(\d+)\}")


def expand(template: str, seed: int) -> str:
    rng = random.Random(seed)

    def field(m: re.Match[str]) -> str:
        if m.group(1):
            return base64.b64encode(m.group(2).encode()).decode()
        alphabet = _ALPHABETS[m.group(3)]
        return "".join(rng.choice(alphabet) for _ in range(int(m.group(4))))

    return _FIELD.sub(field, template)


# (kind, language, text holding a credential, a harmless near-miss)
KINDS: list[tuple[str, str, str, str]] = [
    ("AWS access key id", "en", "aws_access_key_id = AKIA{A:16}", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"),
    (
        "AWS secret access key",
        "en",
        "aws_secret_access_key = {b:40}",
        "aws_secret_access_key = os.environ['AWS_SECRET_ACCESS_KEY']",
    ),
    ("GitHub classic token", "en", "export GITHUB_TOKEN=ghp_{a:36}", "export GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("GitHub fine-grained token", "en", "token: github_pat_{a:22}_{a:59}", "token: github_pat_<your-token>"),
    ("GitLab token", "en", "GITLAB_TOKEN=glpat-{u:20}", "Create a token with the glpat- prefix in your GitLab settings."),
    ("Slack bot token", "en", "SLACK_BOT_TOKEN=xoxb-{d:12}-{d:13}-{a:24}", "SLACK_BOT_TOKEN=xoxb-your-bot-token"),
    (
        "Slack webhook",
        "en",
        "Post alerts to https://hooks.slack.com/services/T{A:8}/B{A:10}/{a:24}",
        "Post alerts to https://hooks.slack.com/services/T000/B000/XXXX (your webhook URL)",
    ),
    (
        "Discord bot token",
        "en",
        "bot.run('MT{a:24}.{u:6}.{u:38}')",
        "bot.run(os.environ['DISCORD_TOKEN'])",
    ),
    (
        "Discord webhook",
        "en",
        "webhook: https://discord.com/api/webhooks/{d:18}/{u:68}",
        "webhook: https://discord.com/api/webhooks/<id>/<token>",
    ),
    ("Twilio API key", "en", "TWILIO_API_KEY=SK{h:32}", "TWILIO_API_KEY=SKxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("Twilio auth token", "en", "twilio_auth_token: {h:32}", "twilio_auth_token: ${TWILIO_AUTH_TOKEN}"),
    ("Hugging Face token", "en", "HF_TOKEN=hf_{L:34}", "HF_TOKEN=hf_..."),
    ("PyPI upload token", "en", "password = pypi-AgEIcHlwaS5vcmc{u:60}", "password = __token__"),
    ("SendGrid key", "en", "SENDGRID_API_KEY='SG.{u:22}.{u:43}'", "SENDGRID_API_KEY='SG.your-key'"),
    (
        "Telegram bot token",
        "en",
        "the bot token is {d:10}:AA{u:33}",
        "the bot token is given to you by BotFather",
    ),
    ("Shopify access token", "en", "X-Shopify-Access-Token: shpat_{h:32}", "X-Shopify-Access-Token: {access_token}"),
    ("DigitalOcean token", "en", "DIGITALOCEAN_TOKEN=dop_v1_{h:64}", "DIGITALOCEAN_TOKEN=dop_v1_..."),
    ("OpenAI key", "en", "OPENAI_API_KEY=sk-proj-{u:48}", "OPENAI_API_KEY=sk-..."),
    ("Anthropic key", "en", "ANTHROPIC_API_KEY=sk-ant-api03-{u:93}AA", "ANTHROPIC_API_KEY=sk-ant-xxxxxxxx"),
    ("Google API key", "en", "key=AIza{u:35}", "key=AIzaSyEXAMPLE"),
    ("Stripe secret key", "en", "stripe.api_key = 'sk_live_{a:24}'", "stripe.api_key = 'sk_test_...'"),
    ("Stripe restricted key", "en", "STRIPE_KEY=rk_live_{a:24}", "STRIPE_KEY=rk_live_<restricted key>"),
    ("npm token", "en", "//registry.npmjs.org/:_authToken=npm_{a:36}", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}"),
    (
        "JSON web token",
        "en",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{u:40}.{u:43}",
        "Authorization: Bearer <token>",
    ),
    (
        "Bearer token (opaque)",
        "en",
        'curl -H "Authorization: Bearer {a:40}" https://api.internal.test/v1',
        'curl -H "Authorization: Bearer $TOKEN" https://api.internal.test/v1',
    ),
    (
        "Authorization Basic",
        "en",
        "Authorization: Basic {basic:deploy:Vt8#qLm2xR}",
        "Authorization: Basic base64(username:password)",
    ),
    ("API key header", "en", "X-API-Key: {a:32}", "X-API-Key: YOUR_API_KEY"),
    (
        "Docker config auths",
        "en",
        '{"auths": {"registry.example.com": {"auth": "{basic:ci:Hq7!vN3pLx9}"}}}',
        '{"auths": {"registry.example.com": {}}, "credsStore": "desktop"}',
    ),
    ("mysql -p", "en", "mysql -u root -pTq8vZ3mw!x -h db1", "mysql -u root -p -h db1"),
    ("netrc", "en", "machine api.heroku.com login ops@corp.test password 7f{h:30}", "machine api.heroku.com login ops@corp.test"),
    ("pgpass", "en", "db1.internal:5432:orders:app:Rk7pW2qZ9x", "hostname:port:database:username:password"),
    ("URL with password", "en", "DATABASE_URL=postgres://app:Wq8zL2xk7R@db1.internal:5432/orders", "postgres://user:password@localhost/db"),
    ("Redis URL with password", "en", "redis://:Zp4kQ9vW2m@cache.internal:6379/0", "redis://:${REDIS_PASSWORD}@cache:6379/0"),
    ("git credential URL", "en", "https://bob:ghp_{a:36}@github.com/acme/app.git", "https://github.com/acme/app.git"),
    (
        "RSA private key",
        "en",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA{b:60}\n{b:64}\n-----END RSA PRIVATE KEY-----",
        "Put the -----BEGIN RSA PRIVATE KEY----- block in a file only you can read.",
    ),
    (
        "OpenSSH private key",
        "en",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA{b:50}\n-----END OPENSSH PRIVATE KEY-----",
        "ssh-keygen writes -----BEGIN OPENSSH PRIVATE KEY----- files.",
    ),
    (
        "service-account JSON key",
        "en",
        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{b:60}\\n-----END PRIVATE KEY-----\\n"',
        '"private_key_id": "set by the console"',
    ),
    (
        "Azure storage key",
        "en",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={b:86}==;EndpointSuffix=core.windows.net",
        "AccountKey=<your-account-key>;EndpointSuffix=core.windows.net",
    ),
    ("password in config", "en", 'password = "Zx8#pLq2vR"', 'password = "changeme"'),
    ("api key in YAML", "en", "api_key: {a:32}", "api_key: ${API_KEY}"),
    ("client secret", "en", "client_secret={a:40}", "client_secret=settings.CLIENT_SECRET"),
    ("Mailgun key", "en", "MAILGUN_API_KEY=key-{h:32}", "MAILGUN_API_KEY=key-xxxxxxxx"),
    ("Mailchimp key", "en", "mailchimp_key = '{h:32}-us12'", "mailchimp_key = os.getenv('MAILCHIMP_KEY')"),
    ("Heroku API key", "en", "HEROKU_API_KEY={h:8}-{h:4}-{h:4}-{h:4}-{h:12}", "HEROKU_API_KEY=$(heroku auth:token)"),
    ("Datadog API key", "en", "datadog_api_key: {l:40}", "datadog_api_key: <DATADOG_API_KEY>"),
    ("New Relic key", "en", "newrelic_api_key: NRAK-{A:27}", "newrelic_api_key: NRAK-XXXXXXXX"),
    ("Linear key", "en", "LINEAR_API_KEY=lin_api_{a:40}", "LINEAR_API_KEY=lin_api_..."),
    ("Postman key", "en", "POSTMAN_API_KEY=PMAK-{h:24}-{h:34}", "POSTMAN_API_KEY=PMAK-..."),
    ("Doppler token", "en", "DOPPLER_TOKEN=dp.pt.{a:43}", "DOPPLER_TOKEN=dp.pt.xxxx"),
    ("Grafana service account token", "en", "GRAFANA_TOKEN=glsa_{a:32}_{h:8}", "GRAFANA_TOKEN=glsa_..."),
    ("Sentry user token", "en", "SENTRY_AUTH_TOKEN=sntryu_{h:64}", "SENTRY_AUTH_TOKEN=sntryu_..."),
    ("Vault token", "en", "VAULT_TOKEN=hvs.{u:100}", "VAULT_TOKEN=$(vault print token)"),
    ("Databricks token", "en", "DATABRICKS_TOKEN=dapi{h:32}", "DATABRICKS_TOKEN=dapi..."),
    ("Pulumi token", "en", "PULUMI_ACCESS_TOKEN=pul-{h:40}", "PULUMI_ACCESS_TOKEN=pul-..."),
    (
        "Age secret key",
        "en",
        "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
        "age-keygen prints AGE-SECRET-KEY-1...",
    ),
    ("wifi passcode in prose", "en", "the wifi passcode is Bx7!kq29Lm", "the wifi passcode is on the fridge"),
    ("pw for ...: in prose", "en", "pw for the NAS: Qz8r#Lx2v", "pw for the NAS is in the vault"),
    ("password in prose", "en", "My password is Tr0ub4dor&3z", "My password is stored in the keychain."),
    (
        "login in prose",
        "en",
        "You can log in as admin with the password Vn3$xq8Lp.",
        "You can log in as admin with the password you chose.",
    ),
    ("PIN and password in a message", "en", "Bank login: user jdoe, password Kq7vX2m9Z", "Bank login: use your usual password."),
    (
        "password in prose (German)",
        "de",
        "Das Passwort für den Router ist Hq8vZ2#kLm.",
        "Das Passwort für den Router steht auf dem Aufkleber.",
    ),
    ("Kennwort (German)", "de", "Kennwort: Rt5!mx8Qz", "Kennwort: siehe Tresor"),
    ("Zugangsdaten (German)", "de", "Mein WLAN-Passwort lautet Zw4k9#LqRx", "Mein WLAN-Passwort lautet wie immer."),
    ("password in prose (Chinese)", "zh", "我的密码是Xk82!mQz9", "我的密码是保密的"),
    ("database password (Chinese)", "zh", "数据库密码：Pq7x#Lm29z", "数据库密码：见保险库"),
    ("wifi password (Chinese)", "zh", "WiFi密码是 Hs8v3kQ2xz", "WiFi密码在路由器背面"),
    ("口令 (Chinese)", "zh", "服务器登录口令为 Wm4#zq8LxT", "服务器登录口令请向管理员索取"),
    ("mot de passe (French)", "fr", "Le mot de passe du serveur est Vq9!xk2LmZ", "Le mot de passe du serveur est dans le coffre."),
    ("contraseña (Spanish)", "es", "La contraseña del wifi es Lp3#vz8QkW", "La contraseña del wifi está en la nevera."),
]
