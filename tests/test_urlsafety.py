"""Database and LLM URLs that carry a secret are refused without echoing it."""

from __future__ import annotations

import pytest

from oracle_rag.config import load_settings
from oracle_rag.errors import ConfigurationError
from oracle_rag.urlsafety import check_url, redact_url, url_has_secret

SECRET = "S3cr3t-Pw!"
# The secret percent-encoded (as a careful operator would write it) and double-encoded.
SECRET_ENC = "S3cr3t-Pw%21"
SECRET_ENC2 = "S3cr3t-Pw%2521"

SECRET_URLS = [
    # user:password@
    f"oracle+oracledb://scott:{SECRET}@h:1521/?service_name=x",
    f"oracle+oracledb://scott:{SECRET_ENC}@h:1521/?service_name=x",
    # ':' percent-encoded, once and twice
    f"oracle+oracledb://scott%3A{SECRET}@h/?service_name=x",
    f"oracle+oracledb://scott%3a{SECRET_ENC}@h/?service_name=x",
    f"oracle+oracledb://scott%253A{SECRET_ENC2}@h/?service_name=x",
    # the whole userinfo percent-encoded, '@' included
    f"oracle+oracledb://scott%3A{SECRET_ENC}%40h:1521/?service_name=x",
    # an empty user, a password only
    f"oracle+oracledb://:{SECRET}@h:1521/?service_name=x",
    # passwords holding characters that end the host part ('/', '?', '#', ' ', '@', ':'):
    # SQLAlchemy's make_url still reads everything up to '@' as the password
    "oracle+oracledb://scott:S3c/r3t-Pw!@h:1521/?service_name=x",
    "oracle+oracledb://scott:S3c?r3t-Pw!@h:1521/?service_name=x",
    "oracle+oracledb://scott:S3c#r3t-Pw!@h:1521/?service_name=x",
    "oracle+oracledb://scott:S3c r3t-Pw!@h:1521/?service_name=x",
    "oracle+oracledb://scott:S3c@r3t-Pw!@h:1521/?service_name=x",
    "oracle+oracledb://scott:S3c:r3t-Pw!@h:1521/?service_name=x",
    # SQL*Plus / EZConnect user/password@
    f"scott/{SECRET}@host:1521/svc",
    f"oracle+oracledb://scott/{SECRET}@h",
    f"oracle+oracledb://scott%2F{SECRET_ENC}@h:1521/?service_name=x",
    f"scott/{SECRET}@(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=h)(PORT=1521)))",
    # password-like query parameters, any case, encoded keys and values
    f"oracle+oracledb://scott@h:1521/?service_name=x&password={SECRET}",
    f"oracle+oracledb://scott@h:1521/?password={SECRET_ENC}&service_name=x",
    f"oracle+oracledb://scott@h:1521/?PWD={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&PassWord = {SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&passwd={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&pass%77ord={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&%70assword={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&pass%2577ord={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x%26password%3D{SECRET_ENC}",
    f"oracle+oracledb://scott@h:1521/?service_name=x;password={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&wallet_password={SECRET}",
    f"oracle+oracledb://scott@h:1521/?token={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&Token={SECRET}",
    f"oracle+oracledb://scott@h:1521/?access_token={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&api_key={SECRET}",
    f"oracle+oracledb://scott@h:1521/?service_name=x&secret={SECRET}",
    # a connect descriptor with a password clause
    "oracle+oracledb://scott@/?dsn=(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=h)(PORT=1521))"
    f"(CONNECT_DATA=(SERVICE_NAME=x))(password={SECRET}))",
    "oracle+oracledb://scott@/?dsn=%28DESCRIPTION%3D%28ADDRESS%3D%28HOST%3Dh%29%29"
    f"%28PASSWORD%3D{SECRET_ENC}%29%29",
    # surrounding whitespace does not hide it
    f"  oracle+oracledb://scott:{SECRET}@h:1521/?service_name=x  ",
    # an LLM endpoint with a key in the URL
    f"https://llm.example.com/v1?api_key={SECRET}",
    f"https://user:{SECRET}@llm.example.com/v1",
]

SAFE_URLS = [
    "oracle+oracledb://scott@h:1521/?service_name=freepdb1",
    "oracle+oracledb://scott@h:1521/freepdb1",
    "oracle+oracledb://@h:1521/?service_name=freepdb1",
    "oracle+oracledb://h:1521/?service_name=freepdb1",
    "oracle+oracledb://admin@mydb_high?config_dir=/opt/wallet&wallet_location=/opt/wallet",
    "oracle+oracledb://admin@adb.eu-frankfurt-1.oraclecloud.com:1522/"
    "?service_name=abc_high.adb.oraclecloud.com&ssl_server_dn_match=true",
    "oracle+oracledb://scott@h:1521/?service_name=x&wallet_location=%2Fopt%2Fwallet%2Fx",
    "oracle+oracledb://scott@h:1521/?service_name=passwordless",
    "oracle+oracledb://scott@h:1521/?service_name=x&tokenizer=word",
    "oracle+oracledb://scott@h:1521/?service_name=x&password_env=ORACLE_RAG_DB_PASSWORD",
    "oracle+oracledb://scott:@h:1521/?service_name=x",
    "http://127.0.0.1:8080/v1",
    "http://localhost:11434/v1",
    "https://api.openai.com/v1",
]


def _secret_fragments() -> list[str]:
    return [SECRET, SECRET_ENC, SECRET_ENC2, "S3cr3t", "r3t-Pw"]


def _assert_no_secret(err: ConfigurationError) -> None:
    texts = [str(err), repr(err), err.message, repr(err.details), repr(err.args)]
    for text in texts:
        for fragment in _secret_fragments():
            assert fragment not in text, f"{fragment!r} leaked into {text!r}"


def test_the_lists_are_big_enough() -> None:
    assert len(SECRET_URLS) >= 12
    assert len(SAFE_URLS) >= 5


@pytest.mark.parametrize("url", SECRET_URLS)
def test_url_with_secret_is_detected(url: str) -> None:
    assert url_has_secret(url)


@pytest.mark.parametrize("url", SECRET_URLS)
def test_check_url_refuses_without_echoing(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        check_url(url, key="database_url")
    err = info.value
    assert err.details["key"] == "database_url"
    assert "database_url" in str(err)
    assert "ORACLE_RAG_DB_PASSWORD" in str(err)  # says where the password goes instead
    _assert_no_secret(err)


@pytest.mark.parametrize("url", SECRET_URLS)
def test_redact_url_never_shows_the_secret(url: str) -> None:
    redacted = redact_url(url)
    for fragment in _secret_fragments():
        assert fragment not in redacted


@pytest.mark.parametrize("url", SAFE_URLS)
def test_safe_urls_pass(url: str) -> None:
    assert not url_has_secret(url)
    assert check_url(url, key="database_url") == url


def test_password_env_named_in_message() -> None:
    with pytest.raises(ConfigurationError) as info:
        check_url(f"oracle+oracledb://scott:{SECRET}@h/", key="database_url", password_env="MY_DB_PW")
    assert "MY_DB_PW" in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        f"oracle+oracledb://scott:{SECRET}@h:1521/?service_name=x",
        f"oracle+oracledb://scott@h:1521/?service_name=x&password={SECRET}",
        f"scott/{SECRET}@host:1521/svc",
    ],
)
def test_load_settings_refuses_secret_database_url(url: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as info:
        load_settings(env={"ORACLE_RAG_DATABASE_URL": url})
    assert info.value.details["key"] == "database_url"
    _assert_no_secret(info.value)


def test_load_settings_refuses_secret_in_toml(tmp_path) -> None:
    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text(f'database_url = "oracle+oracledb://scott:{SECRET}@h:1521/?service_name=x"\n')
    with pytest.raises(ConfigurationError) as info:
        load_settings(env={}, config_file=cfg)
    _assert_no_secret(info.value)


def test_load_settings_refuses_secret_llm_url(tmp_path) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_settings(
            env={"ORACLE_RAG_LLM_URL": f"https://llm.example.com/v1?token={SECRET}"},
            config_file=_empty_toml(tmp_path),
        )
    assert info.value.details["key"] == "llm_url"
    assert "ORACLE_RAG_LLM_API_KEY" in str(info.value)
    _assert_no_secret(info.value)


def _empty_toml(tmp_path):
    path = tmp_path / "empty.toml"
    path.write_text("")
    return path


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("oracle+oracledb://scott@h:1521/?service_name=freepdb1", "oracle+oracledb://h:1521/"),
        ("oracle+oracledb://scott@h:1521/freepdb1", "oracle+oracledb://h:1521/freepdb1"),
        (f"oracle+oracledb://scott:{SECRET}@h:1521/freepdb1?x=1", "oracle+oracledb://h:1521/freepdb1"),
        (f"oracle+oracledb://scott/{SECRET}@h:1521/svc", "oracle+oracledb://h:1521/svc"),
        (f"oracle+oracledb://scott%3A{SECRET_ENC}@h/svc", "oracle+oracledb://h/svc"),
        ("oracle+oracledb://scott:S3c/r3t@h:1521/?service_name=x", "oracle+oracledb://h:1521/"),
        ("oracle+oracledb://scott:S3c?r3t@h:1521/?service_name=x", "oracle+oracledb://h:1521/"),
        ("oracle+oracledb://scott:S3c@r3t@h:1521/?service_name=x", "oracle+oracledb://h:1521/"),
        (f"https://llm.example.com/v1?api_key={SECRET}#frag", "https://llm.example.com/v1"),
        ("http://localhost:11434/v1", "http://localhost:11434/v1"),
        (f"scott/{SECRET}@host:1521/svc", "<unparseable url>"),
        ("", "<unparseable url>"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


ISSUE_13_LLM_URLS = [
    f"https://llm.example.com/v1?api-key={SECRET}",
    f"https://llm.example.com/v1?key={SECRET}",
    f"https://llm.example.com/v1?sig={SECRET}",
    f"https://llm.example.com/v1?apikey={SECRET}",
    f"https://llm.example.com/v1?x-api-key={SECRET}",
    f"https://llm.example.com/v1?API_KEY={SECRET}",
    f"https://llm.example.com/v1?api%2Dkey={SECRET_ENC}",
    f"https://llm.example.com/v1?sv=2024&X-Amz-Signature={SECRET}",
    f"https://llm.example.com/v1?access_token={SECRET}",
    f"https://llm.example.com/v1#access_token={SECRET}",
    f"https://{SECRET}@llm.example.com/v1",
    f"https://{SECRET_ENC}@llm.example.com/v1",
    f"http://sk-{SECRET}@127.0.0.1:8080/v1",
]


@pytest.mark.parametrize("url", ISSUE_13_LLM_URLS)
def test_llm_url_key_shapes_are_refused_without_echoing(url, tmp_path):
    with pytest.raises(ConfigurationError) as info:
        load_settings(env={"ORACLE_RAG_LLM_URL": url}, config_file=_empty_toml(tmp_path))
    assert info.value.details["key"] == "llm_url"
    _assert_no_secret(info.value)
    assert all(fragment not in redact_url(url) for fragment in _secret_fragments())


@pytest.mark.parametrize(
    "url",
    [
        "https://llm.example.com/openai/v1?api-version=2024-06-01",
        "http://127.0.0.1:11434/v1",
        "https://llm.example.com/v1?deployment=gpt",
    ],
)
def test_llm_urls_without_secrets_pass(url, tmp_path):
    assert load_settings(env={"ORACLE_RAG_LLM_URL": url}, config_file=_empty_toml(tmp_path)).llm_url == url
