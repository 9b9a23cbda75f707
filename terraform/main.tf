# oracle-rag on Oracle Cloud: an Autonomous Database (Transaction Processing, ECPU) and a
# private bucket holding the ONNX embedding model, readable by the database through a
# read-only pre-authenticated request (PAR). After apply, local/bootstrap.sh migrates the
# schema and loads the model with DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(credential => NULL).
# Walkthrough: README.md.

provider "oci" {
  tenancy_ocid        = var.tenancy_ocid
  region              = var.region
  config_file_profile = var.oci_config_profile
}

data "oci_objectstorage_namespace" "this" {
  compartment_id = var.tenancy_ocid
}

locals {
  namespace  = data.oci_objectstorage_namespace.this.namespace
  model_path = abspath("${path.module}/.cache/${var.model_object_name}")
}

# ---------------------------------------------------------------- Autonomous Database

resource "oci_database_autonomous_database" "rag" {
  compartment_id = var.compartment_ocid
  db_name        = var.db_name
  display_name   = var.display_name
  admin_password = var.admin_password
  db_workload    = "OLTP"
  db_version     = var.db_version
  is_free_tier   = var.is_free_tier
  compute_model  = "ECPU"
  # Checked against the provider's schema (database_autonomous_database_resource.go, oci-go-sdk
  # v65): compute_model, compute_count (float), data_storage_size_in_tbs, license_model,
  # is_free_tier, is_mtls_connection_required and whitelisted_ips are all optional arguments;
  # cpu_core_count/ocpu_count belong to the OCPU model and are not set. Always Free on the
  # ECPU model is at most 2 ECPUs and about 20 GB of storage, not scalable (Autonomous
  # Database docs, "Always Free Autonomous Database"): so 2 ECPUs, no storage size and no
  # license model are sent for it. A tenancy without the ECPU model offers Always Free as
  # 1 OCPU only; this configuration does not cover that case.
  compute_count            = var.is_free_tier ? 2 : var.compute_count
  data_storage_size_in_tbs = var.is_free_tier ? null : var.data_storage_size_in_tbs
  license_model            = var.is_free_tier ? null : var.license_model

  is_mtls_connection_required = var.is_mtls_connection_required
  whitelisted_ips             = length(var.whitelisted_ips) > 0 ? var.whitelisted_ips : null

  freeform_tags = var.freeform_tags

  lifecycle {
    precondition {
      condition     = var.is_mtls_connection_required || length(var.whitelisted_ips) > 0
      error_message = "TLS without a wallet (is_mtls_connection_required = false) needs an access control list: set whitelisted_ips."
    }
  }
}

# ---------------------------------------------------------------- model bucket

resource "oci_objectstorage_bucket" "models" {
  #checkov:skip=CKV_OCI_9:Customer-managed keys need an OCI Vault, which Always Free does not include; Oracle-managed encryption is always on and kms_key_id takes a Vault key when you have one.
  compartment_id        = var.compartment_ocid
  namespace             = local.namespace
  name                  = var.bucket_name
  access_type           = "NoPublicAccess"
  versioning            = "Enabled"
  object_events_enabled = true
  kms_key_id            = var.kms_key_id
  freeform_tags         = var.freeform_tags
}

# Download the model into .cache/ and check its SHA-256 before anything is uploaded.
# The script fails on a mismatch, which fails the apply.
resource "terraform_data" "model_file" {
  triggers_replace = [lower(var.model_sha256), var.model_object_name]
  input            = local.model_path

  provisioner "local-exec" {
    interpreter = ["bash"]
    command     = "${path.module}/scripts/fetch-model.sh"
    environment = {
      MODEL_URL    = var.model_url
      MODEL_SHA256 = lower(var.model_sha256)
      MODEL_DEST   = local.model_path
    }
  }
}

resource "oci_objectstorage_object" "model" {
  namespace = local.namespace
  bucket    = oci_objectstorage_bucket.models.name
  object    = var.model_object_name
  # The provider checks that `source` exists when it validates the configuration. Taking the
  # path from terraform_data.output keeps it unknown until the download has run, so the
  # first plan does not fail on a file that does not exist yet.
  source                     = terraform_data.model_file.output
  content_type               = "application/octet-stream"
  delete_all_object_versions = true
  metadata = {
    "source-sha256" = lower(var.model_sha256)
  }

  depends_on = [terraform_data.model_file]
}

# ---------------------------------------------------------------- read-only PAR

# The expiry is computed once, when this resource is created, and kept in state; a
# timestamp() or plantimestamp() expression would change on every plan and force a new PAR
# (and a new URL) each time. A new model checksum renews it.
resource "time_offset" "par_expiry" {
  offset_hours = var.par_expiry_hours
  triggers = {
    model_sha256 = lower(var.model_sha256)
  }
}

# object_name, not object: the provider marks `object` deprecated in favour of `object_name`
# (internal/service/objectstorage/objectstorage_preauthrequest_resource.go:
# FieldDeprecatedForAnother("object", "object_name"); the two conflict).
resource "oci_objectstorage_preauthrequest" "model_read" {
  namespace    = local.namespace
  bucket       = oci_objectstorage_bucket.models.name
  object_name  = oci_objectstorage_object.model.object
  name         = "${var.bucket_name}-model-read"
  access_type  = "ObjectRead"
  time_expires = time_offset.par_expiry.rfc3339
}
