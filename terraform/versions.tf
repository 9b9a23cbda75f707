# Terraform 1.4 is the floor because main.tf uses the built-in terraform_data resource
# (added in 1.4); lifecycle preconditions need 1.2.
terraform {
  required_version = ">= 1.4.0"

  required_providers {
    # 7.x is the current major line of the OCI provider (7.32.0 in January 2026); the
    # resources used here keep the same arguments across it.
    oci = {
      source  = "oracle/oci"
      version = "~> 7.0"
    }
    # time_offset pins the PAR expiry at creation, so it does not move on every plan.
    time = {
      source  = "hashicorp/time"
      version = "~> 0.13"
    }
  }
}
