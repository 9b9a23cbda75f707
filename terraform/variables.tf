# Inputs for the oracle-rag OCI stack. Secrets (admin_password, model_url when it is a PAR)
# are marked sensitive; pass them with TF_VAR_... environment variables or an untracked
# terraform.tfvars (see terraform.tfvars.example and .gitignore). Terraform state still holds
# them in clear text: keep the state in an encrypted, access-controlled backend.

# ---------------------------------------------------------------- tenancy and provider

variable "tenancy_ocid" {
  description = "OCID of the tenancy; also used to look up the Object Storage namespace."
  type        = string

  validation {
    condition     = can(regex("^ocid1\\.tenancy\\.", var.tenancy_ocid))
    error_message = "The tenancy_ocid must start with \"ocid1.tenancy.\"."
  }
}

variable "compartment_ocid" {
  description = "OCID of the compartment for the database and the bucket (the tenancy OCID means the root compartment)."
  type        = string

  validation {
    condition     = can(regex("^ocid1\\.(compartment|tenancy)\\.", var.compartment_ocid))
    error_message = "The compartment_ocid must start with \"ocid1.compartment.\" (or \"ocid1.tenancy.\" for the root compartment)."
  }
}

variable "region" {
  description = "OCI region identifier, e.g. eu-frankfurt-1; also used to build the PAR URL."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+(-[a-z]+)+-[0-9]+$", var.region))
    error_message = "The region must be an OCI region identifier such as us-ashburn-1."
  }
}

variable "oci_config_profile" {
  description = "Profile in ~/.oci/config that the OCI provider authenticates with."
  type        = string
  default     = "DEFAULT"
}

variable "freeform_tags" {
  description = "Free-form tags put on every resource that accepts them."
  type        = map(string)
  default     = { project = "oracle-rag" }
}

# ---------------------------------------------------------------- Autonomous Database

variable "db_name" {
  description = "Database name: a letter, then up to 13 letters or digits; unique in the tenancy."
  type        = string
  default     = "ragdb"

  validation {
    condition     = can(regex("^[A-Za-z][A-Za-z0-9]{0,13}$", var.db_name))
    error_message = "The db_name must start with a letter and hold at most 14 letters or digits (no _ or -)."
  }
}

variable "display_name" {
  description = "Console display name of the Autonomous Database."
  type        = string
  default     = "oracle-rag"
}

variable "admin_password" {
  description = "Password of the ADMIN user: 12-30 characters with an upper-case letter, a lower-case letter and a digit; no double quote and not containing \"admin\". Used only to create the application users."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.admin_password) >= 12 && length(var.admin_password) <= 30
    error_message = "The admin_password must be 12 to 30 characters long."
  }

  validation {
    condition     = can(regex("[A-Z]", var.admin_password)) && can(regex("[a-z]", var.admin_password)) && can(regex("[0-9]", var.admin_password))
    error_message = "The admin_password needs at least one upper-case letter, one lower-case letter and one digit."
  }

  validation {
    condition     = !can(regex("\"", var.admin_password)) && !can(regex("(?i)admin", var.admin_password))
    error_message = "The admin_password must not contain a double quote or the word \"admin\" in any case."
  }
}

variable "is_free_tier" {
  description = "Create an Always Free Autonomous Database (2 ECPUs, 20 GB, no scaling). Set false for a paid instance sized by compute_count and data_storage_size_in_tbs."
  type        = bool
  default     = true
}

variable "db_version" {
  description = "Database version: 23ai or 26ai (AI Vector Search needs one of them)."
  type        = string
  default     = "23ai"

  validation {
    condition     = contains(["23ai", "26ai"], var.db_version)
    error_message = "The db_version must be \"23ai\" or \"26ai\"."
  }
}

variable "compute_count" {
  description = "ECPUs of a paid instance (ignored, 2, when is_free_tier is true)."
  type        = number
  default     = 2

  validation {
    condition     = var.compute_count >= 2 && floor(var.compute_count) == var.compute_count
    error_message = "The compute_count must be a whole number of at least 2 ECPUs."
  }
}

variable "data_storage_size_in_tbs" {
  description = "Storage of a paid instance in TB (ignored when is_free_tier is true)."
  type        = number
  default     = 1

  validation {
    condition     = var.data_storage_size_in_tbs >= 1 && floor(var.data_storage_size_in_tbs) == var.data_storage_size_in_tbs
    error_message = "The data_storage_size_in_tbs must be a whole number of at least 1."
  }
}

variable "license_model" {
  description = "License of a paid instance: LICENSE_INCLUDED or BRING_YOUR_OWN_LICENSE (not sent for Always Free)."
  type        = string
  default     = "LICENSE_INCLUDED"

  validation {
    condition     = contains(["LICENSE_INCLUDED", "BRING_YOUR_OWN_LICENSE"], var.license_model)
    error_message = "The license_model must be LICENSE_INCLUDED or BRING_YOUR_OWN_LICENSE."
  }
}

variable "is_mtls_connection_required" {
  description = "Require mutual TLS (wallet) for every connection. false also allows one-way TLS without a wallet, which Autonomous Database permits only with an access control list (whitelisted_ips)."
  type        = bool
  default     = false
}

variable "whitelisted_ips" {
  description = "Access control list: public IP addresses, CIDR blocks or VCN OCIDs allowed to connect. Required (non-empty) when is_mtls_connection_required is false."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for ip in var.whitelisted_ips : ip != "0.0.0.0/0"])
    error_message = "Do not open the database to 0.0.0.0/0; list your own addresses."
  }
}

variable "app_user" {
  description = "Name of the application schema user you create after apply (README); only used to print a ready ORACLE_RAG_DATABASE_URL."
  type        = string
  default     = "rag_app"

  validation {
    condition     = can(regex("^[A-Za-z][A-Za-z0-9_]{0,127}$", var.app_user))
    error_message = "The app_user must be a plain Oracle identifier."
  }
}

# ---------------------------------------------------------------- model bucket and PAR

variable "bucket_name" {
  description = "Name of the private Object Storage bucket holding the ONNX model."
  type        = string
  default     = "oracle-rag-models"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{1,256}$", var.bucket_name))
    error_message = "The bucket_name may contain letters, digits, hyphens, underscores and periods only."
  }
}

variable "kms_key_id" {
  description = "Optional OCID of a Vault master key to encrypt the bucket with; null uses Oracle-managed keys."
  type        = string
  default     = null
}

# No default on purpose. Oracle publishes its prebuilt all_MiniLM_L12_v2_augmented.zip behind
# pre-authenticated URLs that it rotates, and the checksum below cannot have a default either:
# pinning both here would break silently the day the URL changes. terraform.tfvars.example
# carries the URL known today; README.md shows how to take its checksum.
variable "model_url" {
  description = "https URL of the embedding model to host: an augmented .onnx file, or a .zip holding exactly one (e.g. Oracle's all_MiniLM_L12_v2_augmented.zip). Sensitive because it may itself be a PAR URL."
  type        = string
  sensitive   = true

  validation {
    condition     = can(regex("^https://", var.model_url))
    error_message = "The model_url must be an https:// URL."
  }
}

variable "model_sha256" {
  description = "Expected SHA-256 (64 hex characters) of the file at model_url (the zip itself when it is a zip). The apply fails on a mismatch."
  type        = string

  validation {
    condition     = can(regex("^[0-9A-Fa-f]{64}$", var.model_sha256))
    error_message = "The model_sha256 must be 64 hexadecimal characters (sha256sum of the downloaded file)."
  }
}

variable "model_object_name" {
  description = "Object name of the ONNX file in the bucket; the loaded model takes its name from ORACLE_RAG_EMBEDDING_MODEL, not from this."
  type        = string
  default     = "all_MiniLM_L12_v2.onnx"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]+\\.onnx$", var.model_object_name))
    error_message = "The model_object_name must be a plain file name ending in .onnx."
  }
}

variable "par_expiry_hours" {
  description = "Lifetime of the read-only pre-authenticated request, in hours from its creation (8760 = one year)."
  type        = number
  default     = 8760

  validation {
    condition     = var.par_expiry_hours > 0 && floor(var.par_expiry_hours) == var.par_expiry_hours
    error_message = "The par_expiry_hours must be a whole number greater than 0."
  }
}
