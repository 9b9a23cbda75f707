locals {
  adb_connection_strings = try(oci_database_autonomous_database.rag.connection_strings[0], null)

  # One-way TLS connect descriptors (no wallet), keyed by consumer group (high, medium, low,
  # tp, tpurgent). Empty while mTLS is required.
  adb_tls_descriptors = {
    for group, values in {
      for p in try(local.adb_connection_strings.profiles, []) :
      lower(p.consumer_group) => p.value...
      if p.tls_authentication == "SERVER" && p.protocol == "TCPS" && p.syntax_format == "LONG" && p.host_format == "FQDN" && p.session_mode == "DIRECT"
    } : group => values[0]
  }
}

output "minilm_onnx_par_url" {
  description = "Read-only pre-authenticated URL of the ONNX model, for MINILM_ONNX_PAR_URL / DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(credential => NULL). A bearer credential: terraform output -raw minilm_onnx_par_url."
  value       = "https://objectstorage.${var.region}.oraclecloud.com${oci_objectstorage_preauthrequest.model_read.access_uri}"
  sensitive   = true
}

output "minilm_onnx_par_expires" {
  description = "When the pre-authenticated URL stops working (RFC 3339)."
  value       = time_offset.par_expiry.rfc3339
}

output "model_object" {
  description = "Where the model lives: namespace, bucket and object name."
  value = {
    namespace = local.namespace
    bucket    = oci_objectstorage_bucket.models.name
    object    = oci_objectstorage_object.model.object
  }
}

output "adb_id" {
  description = "OCID of the Autonomous Database."
  value       = oci_database_autonomous_database.rag.id
}

output "adb_connection_strings" {
  description = "host:port/service_name per consumer group (HIGH, MEDIUM, LOW, TP, TPURGENT). No credentials."
  value       = try(local.adb_connection_strings.all_connection_strings, {})
}

output "adb_tls_connect_descriptors" {
  description = "One-way TLS connect descriptors per consumer group (no wallet needed); empty while mTLS is required."
  value       = local.adb_tls_descriptors
}

output "oracle_rag_database_url" {
  description = "ORACLE_RAG_DATABASE_URL for the application user over one-way TLS (low consumer group). Holds no password: set ORACLE_RAG_DB_PASSWORD. Null while mTLS is required (use a wallet, docs/operations-oracle.md)."
  value       = contains(keys(local.adb_tls_descriptors), "low") ? "oracle+oracledb://${lower(var.app_user)}@/?dsn=${urlencode(local.adb_tls_descriptors["low"])}" : null
}
